"""The ``canonicalize --json`` document's types: :class:`CanonicalizeReport` and its rows.

Built by :meth:`prefixcache.analyzer.canonical.run.CanonicalRun.report`; ``orjson.dumps(report)``
is the document, and ``scripts/gen_docs.py`` derives ``docs/schemas/canonicalize.schema.json``
from these types. Token counts are tokens of the run's tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixcache.analyzer.canonical.review import ChangeSet


@dataclass(frozen=True, slots=True)
class ReuseFigures:
    """Requests, prompt tokens and reusable tokens (shared with an earlier request of the input)."""

    requests: int
    prompt_tokens: int
    reusable_tokens: int

    @property
    def fraction(self) -> float:
        """Reusable over prompt tokens (0.0 for no tokens)."""
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True, slots=True)
class BeforeAfter:
    """Reuse of the input as logged (``before``) and canonicalized (``after``)."""

    before: ReuseFigures
    after: ReuseFigures


@dataclass(frozen=True, slots=True)
class SessionReuse:
    """One session of one file: reuse before and after."""

    source: str
    session: str
    before: ReuseFigures
    after: ReuseFigures


@dataclass(frozen=True, slots=True)
class TransformationRow:
    """One rewrite (``applied``) or reported change of one request, by rule code, with the
    request's place (file, record, session, index), the JSON path it concerns and, for a
    rewrite, ``request_recovered_tokens``: the reusable tokens the rewrites of this request
    recover together (after − before; the same figure on each applied row of the request,
    so sum it once per request; 0 for a reported change) and ``recovered_tokens``: what this
    rule's rewrite adds in this request (on the rule's first row in the request, 0 on its other
    rows and on reported changes; see :class:`~prefixcache.analyzer.canonical.review.RuleChange`:
    the rows of a request sum to its figure less what earlier requests' rewrites changed)."""

    source: str
    record: int
    session: str
    index: int
    code: str
    applied: bool
    description: str
    json_path: str
    request_recovered_tokens: int = 0
    recovered_tokens: int = 0


@dataclass(frozen=True, slots=True)
class MinimumEffect:
    """A rewrite that moved a request across its provider's minimum cacheable prompt length
    (:func:`~prefixcache.analyzer.lint.rules.provider.provider_minimum`: OpenAI 1,024 tokens,
    Anthropic 1,024–4,096 by model, ...): the request's place, model and provider, the
    minimum and its prompt tokens before and after, and the ``effect`` (``below``: the
    provider no longer caches it at all; ``above``: it becomes cacheable)."""

    source: str
    record: int
    session: str
    index: int
    model: str
    provider: str
    minimum_tokens: int
    before_tokens: int
    after_tokens: int
    effect: str


@dataclass(frozen=True, slots=True)
class CanonicalizeReport:
    """The ``canonicalize --json`` report: where the output went (``-`` = stdout), how many
    requests were written, every transformation, reuse per session and in total (``after``:
    the written log as read back), every request the rewrite moved across its provider's
    minimum cacheable length, the figure of the rewritten requests before writing
    (``in_memory``), ``prefixcache lint``'s figure of the written log (``verified``), and
    whether it equals the claimed ``total.after`` (``agrees``), the reviewable change set of
    every rewritten request (``changes``: codes, unified diff, recovered tokens, structure check),
    and what ``verified`` is the figure of (``verified_by``): ``written`` the log written to
    ``out``; ``unwritten`` the log as it would be written, linted in memory (``--review``
    without ``--apply`` writes nothing); ``none`` nothing was linted (``--review`` of a format
    that cannot be written back without ``--to openai``: ``verified`` and ``total.after`` are
    then the rewritten requests in memory)."""

    out: str
    written: int
    transformations: list[TransformationRow]
    sessions: list[SessionReuse]
    total: BeforeAfter
    provider_minimum: list[MinimumEffect]
    in_memory: ReuseFigures
    verified: ReuseFigures
    agrees: bool
    changes: list[ChangeSet]
    verified_by: str = "written"
