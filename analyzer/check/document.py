"""The ``check --format json`` document's types: one :class:`TemplateRecord` per template.

Built by :func:`prefixcache.analyzer.check.run.template_record`; ``orjson.dumps(record)`` is one
line of the JSON Lines output, and ``scripts/gen_docs.py`` derives
``docs/schemas/check.schema.json`` from these types. Token counts are the check's tokenizer's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VariationRecord:
    """One variation of one context: values it changed, the stable prefix it leaves
    (tokens), the first differing character of the base render (None: identical) and the
    template ``file`` / ``line`` that produced it; ``answered``: it changes only turn N's end
    after its last message, which the next turn replaces (not counted in the stable prefix)."""

    variation: str
    changed_values: int
    stable_tokens: int
    first_diff_char: int | None
    file: str | None
    line: int | None
    answered: bool = False


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """Turn N (the context) against turn N+1 (``next``: the next given context, or the
    context with a turn appended when ``derived``): turn N's tokens that must survive
    (above the boundary; all without one), the token prefix both share, and the first
    character of turn N that turn N+1 does not repeat (None: turn N is a prefix) with the
    template ``file`` / ``line`` that produced it, and ``tail_tokens``: the tokens of turn N's
    end after its last message (generation prompt, footer) that turn N+1 replaced with the
    answer, which is not a break (as in lint)."""

    next: str
    derived: bool
    prefix_tokens: int
    shared_tokens: int
    first_diff_char: int | None
    file: str | None
    line: int | None
    tail_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ContextRecord:
    """One context: prompt and stable-prefix length (tokens), their ratio, the tokens before
    the ``dynamic-below`` boundary (None without one), every variation, and the turn N /
    N+1 comparison (None for a context without ``messages``)."""

    context: str
    prompt_tokens: int
    stable_tokens: int
    stable_fraction: float
    boundary_tokens: int | None
    variations: list[VariationRecord]
    turn: TurnRecord | None


@dataclass(frozen=True, slots=True)
class CheckFinding:
    """A static finding or a failure: rule ``code``, ``message``, template ``file`` and line."""

    code: str
    message: str
    file: str
    line: int | None


@dataclass(frozen=True, slots=True)
class TemplateRecord:
    """One template of ``check --format json``: verdict, tokenizer, the boundary's line,
    every context, the static findings (failing or not) and the failures."""

    template: str
    passed: bool
    tokenizer: str
    boundary_line: int | None
    contexts: list[ContextRecord]
    static: list[CheckFinding]
    failures: list[CheckFinding]
