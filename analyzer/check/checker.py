"""``prefixcache check``: a CI gate for Jinja2 prompt templates.

Each template is rendered in jinja2's :class:`ImmutableSandboxedEnvironment` with
every given context and with automatic variations of it
(:mod:`prefixcache.analyzer.check.vary`: clock +90 s and +1 day, ids
regenerated, mapping / unordered-list order reversed, whitespace around values).
Every render is tokenized; the **stable prefix** is the longest token prefix the
base render shares with all its variations (what a KV prefix cache could reuse
across requests). The check fails when that prefix is shorter than
``min_stable_tokens`` or ``min_stable_fraction`` of the prompt, when any variation
changes text before the declared boundary ``{# prefixcache: dynamic-below #}``,
or when a static finding (:mod:`prefixcache.analyzer.check.static`) lies above
the boundary (anywhere, if none is declared). Two more failures need no option:

* **first line**: any variation that changes the prompt's first line (a date, an id
  on line 1) fails, boundary or not (``first_line=False`` turns this off);
* **turn N / N+1** (:mod:`prefixcache.analyzer.check.turns`): turn N's render above the
  boundary (all of it without one) must be a prefix of turn N+1's (the next given
  context when it continues this one, else this one with a turn appended); PC401 at
  the template line that produced the first character turn N+1 does not repeat.

Lines: templates are rendered a second time with invisible line markers
(private-use characters) before every line of literal text and inside every
``{{ … }}``, so the first varying character maps back to the template file and
line that produced it, through includes and macros.

Template globals: ``now()`` returns the variant's clock (a timezone-aware
datetime; ``_prefixcache.now`` in the context sets the base clock) and
``strftime_now(fmt)`` formats it (the transformers chat-template convention).
``tojson`` follows transformers' semantics (``json.dumps``, keys unsorted unless
``sort_keys=True``), as most agent runtimes do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.render.files import read_json, read_text
from prefixcache.analyzer.sequence import common_prefix_len
from prefixcache.analyzer.check.render import Trace, TracingLoader, make_env, render
from prefixcache.analyzer.check.static import StaticFinding, boundary_line, static_findings
from prefixcache.analyzer.check.turns import TurnPair, turn_pairs
from prefixcache.analyzer.check.vary import VARIATIONS, meta, vary

_VARIATION_CODE = {"clock+90s": "PC101", "clock+1d": "PC101", "ids": "PC102", "order": "PC402", "whitespace": "PC302"}


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A template ``file`` (as named to the loader), 1-based ``line`` and its ``text``."""

    file: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class VariantResult:
    """One variation of one context: ``stable_tokens`` shared with the base render
    (tokens), ``first_diff_char`` in the base text (None when identical), the
    template ``location`` that produced it, and short excerpts of both renders.
    ``answered`` is True when the variation changes only turn N's answered end (its first
    difference lies in the generation prompt / footer that the next turn replaces,
    :attr:`TurnResult.answered_char`): no later turn reuses those tokens, so, as in lint, it
    shortens neither the stable prefix nor the gate."""

    variation: str
    changed_values: int
    stable_tokens: int
    first_diff_char: int | None
    location: SourceLocation | None
    base_excerpt: str = ""
    variant_excerpt: str = ""
    answered: bool = False


@dataclass(frozen=True, slots=True)
class TurnResult:
    """Turn N (this context) against turn N+1 (``next``, given or derived): the tokens of
    turn N that must survive (``prefix_tokens``: above the boundary, all without one), the
    token prefix the two renders share (``shared_tokens``), and where turn N stops being a
    prefix of turn N+1 (``first_diff_char`` in turn N's text, None when it is one; the
    template ``location`` that produced it; short excerpts of both renders). ``tail_tokens``
    are the tokens of turn N's end after its last message (a generation prompt or footer such
    as "Now reply as the assistant.") that turn N+1 replaced: the next turn answers there, so
    they are not a break, as in lint (docs/methods/reusable-prefix.md). ``code`` is the rule
    a real break reports: PC401 before the first message (the system part changes every
    turn), PC501 inside the rendered conversation (an earlier turn renders differently).
    ``answered_char``: where that answered end starts in turn N's text (None when nothing
    of turn N was replaced, or when the turn breaks)."""

    next: str
    derived: bool
    prefix_tokens: int
    shared_tokens: int
    first_diff_char: int | None
    location: SourceLocation | None
    base_excerpt: str = ""
    next_excerpt: str = ""
    tail_tokens: int = 0
    code: str = "PC401"
    answered_char: int | None = None


@dataclass(frozen=True, slots=True)
class ContextReport:
    """All variations of one context: prompt length, stable prefix and boundary, in tokens;
    ``turn`` the turn N / N+1 comparison (None for a context without ``messages``)."""

    context: str
    total_tokens: int
    stable_tokens: int
    boundary_tokens: int | None
    variants: tuple[VariantResult, ...]
    boundary_char: int | None = None
    turn: TurnResult | None = None
    first_line_end: int = 0

    @property
    def stable_fraction(self) -> float:
        """Stable prefix over prompt length (1.0 for an empty prompt)."""
        return self.stable_tokens / self.total_tokens if self.total_tokens else 1.0


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a template fails the gate: rule ``code``, ``message`` and where."""

    code: str
    message: str
    file: str
    line: int | None


@dataclass(frozen=True, slots=True)
class TemplateReport:
    """The result of checking one template against all contexts."""

    template: str
    tokenizer: str
    boundary_line: int | None
    contexts: tuple[ContextReport, ...]
    static: tuple[StaticFinding, ...]
    failures: tuple[Failure, ...]

    @property
    def passed(self) -> bool:
        return not self.failures

def _excerpt(text: str, at: int, width: int = 40) -> str:
    return text[max(0, at - width // 2) : at + width]


def _location(loader: TracingLoader, marker: int | None) -> SourceLocation | None:
    if marker is None:
        return None
    file, line = loader.table[marker]
    lines = loader.sources.get(file, [])
    return SourceLocation(file, line, lines[line - 1].strip() if 0 < line <= len(lines) else "")


def _variation_code(variation: str, loc: SourceLocation | None, sources: Mapping[str, list[str]]) -> str:
    """The rule code for a variation; an order change is PC203 on a ``tojson`` line,
    PC201 inside a loop over tools, PC402 otherwise."""
    code = _VARIATION_CODE.get(variation, "PC001")
    if variation != "order" or loc is None:
        return code
    if "tojson" in loc.text:
        return "PC203"
    lines = sources.get(loc.file, [])
    for text in reversed(lines[: loc.line]):
        if re.search(r"\{%-?\s*for\b", text):
            return "PC201" if "tool" in text.lower() else code
    return code


def _message_span(text: str, context: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """Where the rendered conversation of ``context`` lies in ``text``: the start of the line
    holding the first message's text and the end of the last one's text (None where a message's
    text, trimmed, is not found: a list content, or a template that rewrites it)."""
    msgs = [m.get("content") for m in context.get("messages", []) if isinstance(m, Mapping)]
    texts = [c.strip() for c in msgs if isinstance(c, str) and c.strip()]
    if not texts:
        return None, None
    start = text.find(texts[0])
    end = text.rfind(texts[-1])
    return (text.rfind("\n", 0, start) + 1 if start >= 0 else None), (end + len(texts[-1]) if end >= 0 else None)


class TemplateChecker:
    """Renders one template file with contexts and their variations and judges it.

    ``template`` is a path; its folder (plus ``search_path``) is where ``include``
    looks. ``tokenizer`` is any object with ``encode(text) -> list[int]`` and a
    ``name`` (see :func:`prefixcache.analyzer.tokenize.get_tokenizer`).
    Raises :class:`ConfigError` for missing files, syntax and render errors.
    """

    def __init__(self, template: str | Path, tokenizer: Any, search_path: Sequence[str] = (),
                 variations: Sequence[str] = VARIATIONS, seed: int = 0, first_line: bool = True) -> None:
        path = Path(template)
        if not path.is_file():
            raise ConfigError(f"{template}: template file not found")
        unknown = [v for v in variations if v not in VARIATIONS]
        if unknown:
            raise ConfigError(f"unknown variation(s) {', '.join(unknown)}; expected {', '.join(VARIATIONS)}")
        self.path, self.name, self.tokenizer = path, path.name, tokenizer
        self.variations, self.seed, self.first_line = tuple(variations), seed, first_line
        roots = [str(path.parent), *search_path]
        self.env, self.traced = make_env(roots, trace=False), make_env(roots, trace=True)
        self.source = read_text(path, "template")
        self.boundary_line = boundary_line(self.source)

    def display(self, file: str) -> str:
        """A loader name as the user would type it: the template path, or its include's path."""
        if file == self.name:
            return str(self.path)
        near = self.path.parent / file
        return str(near) if near.exists() else file

    def _as_given(self, exc: ConfigError) -> ConfigError:
        """``exc`` with a leading loader name (``agent.jinja:12: ...``) shown as the path
        the user gave (``examples/templates/agent.jinja:12: ...``)."""
        head, sep, rest = str(exc).partition(":")
        if sep and head and (head == self.name or (self.path.parent / head).is_file()):
            return ConfigError(f"{self.display(head)}:{rest}")
        return exc

    def _sources(self) -> dict[str, list[str]]:
        loader: TracingLoader = self.traced.loader  # type: ignore[assignment]
        return {self.display(name): lines for name, lines in loader.sources.items()}

    def _renders(self, context: Mapping[str, Any], now: datetime) -> tuple[str, int | None, Trace]:
        try:
            real = Trace.parse(render(self.env, self.name, context, now))
            traced = Trace.parse(render(self.traced, self.name, context, now))
        except ConfigError as exc:
            raise self._as_given(exc) from None
        return real.text, real.boundary, traced

    def _located(self, marker: int | None) -> SourceLocation | None:
        loc = _location(self.traced.loader, marker)  # type: ignore[arg-type]
        return SourceLocation(self.display(loc.file), loc.line, loc.text) if loc else None

    def check_turn(self, pair: TurnPair, base: tuple[str, int | None, Trace], base_ids: list[int]) -> TurnResult:
        """Render turn N+1 of ``pair`` and compare it with turn N (``base``: its text,
        boundary and trace; ``base_ids`` its tokens)."""
        text, boundary, trace = base
        now, _ = meta(pair.next_context)
        next_text, _, next_trace = self._renders(pair.next_context, now)
        next_ids = self.tokenizer.encode(next_text)
        keep = boundary if boundary is not None else len(text)
        prefix_tokens = len(self.tokenizer.encode(text[:keep])) if boundary is not None else len(base_ids)
        shared = common_prefix_len(base_ids, next_ids)
        diff = common_prefix_len(text, next_text)
        if diff >= keep:
            return TurnResult(pair.next_label, pair.derived, prefix_tokens, shared, None, None)
        first, last = _message_span(text, pair.context)
        if last is not None and diff >= last:  # only turn N's end (generation prompt / footer) was replaced
            tail = prefix_tokens - len(self.tokenizer.encode(text[:diff]))
            return TurnResult(pair.next_label, pair.derived, prefix_tokens, shared, None, None, tail_tokens=max(tail, 0),
                              answered_char=diff)
        loc = self._located(trace.marker_at(common_prefix_len(trace.text, next_trace.text)))
        code = "PC501" if first is not None and diff >= first else "PC401"
        return TurnResult(pair.next_label, pair.derived, prefix_tokens, shared, diff, loc, _excerpt(text, diff),
                          _excerpt(next_text, diff), code=code)

    def check_context(self, context: Mapping[str, Any], label: str, pair: TurnPair | None = None) -> ContextReport:
        """Render ``context`` and every variation; measure the stable token prefix; with a
        turn ``pair``, compare turn N with turn N+1 (:meth:`check_turn`)."""
        now, _ = meta(context)
        base_text, boundary, base_trace = self._renders(context, now)
        base_ids = self.tokenizer.encode(base_text)
        turn = self.check_turn(pair, (base_text, boundary, base_trace), base_ids) if pair is not None else None
        answered_from = turn.answered_char if turn is not None else None
        results = []
        for name in self.variations:
            varied = vary(context, name, self.seed)
            text, _, trace = self._renders(varied.context, varied.now)
            stable = common_prefix_len(base_ids, self.tokenizer.encode(text))
            if text == base_text:
                results.append(VariantResult(name, varied.changed, stable, None, None))
                continue
            diff = common_prefix_len(base_text, text)
            loc = self._located(base_trace.marker_at(common_prefix_len(base_trace.text, trace.text)))
            results.append(VariantResult(name, varied.changed, stable, diff, loc, _excerpt(base_text, diff),
                                         _excerpt(text, diff), answered_from is not None and diff >= answered_from))
        stable = min((r.stable_tokens for r in results if not r.answered), default=len(base_ids))
        btok = len(self.tokenizer.encode(base_text[:boundary])) if boundary is not None else None
        first_line = base_text.find("\n")
        return ContextReport(label, len(base_ids), min(stable, len(base_ids)), btok, tuple(results), boundary, turn,
                             first_line_end=len(base_text) if first_line < 0 else first_line)

    def run(self, contexts: Sequence[tuple[str, Mapping[str, Any]]], min_stable_tokens: int = 0,
            min_stable_fraction: float = 0.0) -> TemplateReport:
        """Check all ``(label, context)`` pairs and collect the failures."""
        pairs = turn_pairs(contexts)
        reports = tuple(self.check_context(ctx, label, pairs.get(label)) for label, ctx in contexts)
        try:
            found = static_findings(self.env, self.source, self.name)
        except ConfigError as exc:
            raise self._as_given(exc) from None
        static = tuple(replace(s, file=self.display(s.file)) for s in found)
        failures = [f for r in reports for f in self._judge(r, min_stable_tokens, min_stable_fraction)]
        for s in static:
            at_or_above = self.boundary_line is None or (s.file == str(self.path) and s.line < self.boundary_line)
            if at_or_above:
                where = "before the dynamic-below boundary" if self.boundary_line else "(no dynamic-below boundary)"
                failures.append(Failure(s.code, f"{s.message} {where}", s.file, s.line))
        unique = list(dict.fromkeys(failures))
        tok = getattr(self.tokenizer, "name", type(self.tokenizer).__name__)
        return TemplateReport(str(self.path), tok, self.boundary_line, reports, static, tuple(unique))

    def _judge(self, r: ContextReport, min_tokens: int, min_fraction: float) -> list[Failure]:
        out = []
        worst = min((v for v in r.variants if not v.answered), key=lambda v: v.stable_tokens, default=None)
        wloc = worst.location if worst is not None else None
        if r.stable_tokens < min_tokens or r.stable_fraction < min_fraction:
            code = _variation_code(worst.variation, wloc, self._sources()) if worst else "PC001"
            out.append(Failure(
                code, f"[{r.context}] stable prefix {r.stable_tokens} of {r.total_tokens} tokens "
                f"({r.stable_fraction:.0%}) is below the minimum ({min_tokens} tokens, {min_fraction:.0%}); "
                f"first varied by {worst.variation if worst else '-'}",
                wloc.file if wloc else str(self.path), wloc.line if wloc else None))
        if r.boundary_char is not None:
            for v in r.variants:
                if v.first_diff_char is not None and v.first_diff_char < r.boundary_char and not v.answered:
                    loc = v.location
                    out.append(Failure(
                        _variation_code(v.variation, loc, self._sources()),
                        f"[{r.context}] {v.variation} changes the prompt before the dynamic-below boundary "
                        f"(token {v.stable_tokens} of {r.boundary_tokens}): {v.base_excerpt!r} -> {v.variant_excerpt!r}",
                        loc.file if loc else str(self.path), loc.line if loc else None))
        return out + self._judge_first_line(r) + self._judge_turn(r)

    def _judge_first_line(self, r: ContextReport) -> list[Failure]:
        """A variation changing the prompt's first line fails (unless ``first_line`` is off),
        boundary or not; one already failing above the boundary is not repeated."""
        if not self.first_line:
            return []
        out = []
        for v in r.variants:
            diff = v.first_diff_char
            if diff is None or diff > r.first_line_end or (r.boundary_char is not None and diff < r.boundary_char):
                continue
            loc = v.location
            out.append(Failure(_variation_code(v.variation, loc, self._sources()),
                               f"[{r.context}] {v.variation} changes the first line of the prompt (token "
                               f"{v.stable_tokens}): {v.base_excerpt!r} -> {v.variant_excerpt!r}",
                               loc.file if loc else str(self.path), loc.line if loc else None))
        return out

    def _judge_turn(self, r: ContextReport) -> list[Failure]:
        """Turn N not a token prefix of turn N+1 above the boundary: :attr:`TurnResult.code`, at the template line."""
        t = r.turn
        if t is None or t.first_diff_char is None:
            return []
        loc = t.location
        where = "above the dynamic-below boundary" if r.boundary_char is not None else "(no dynamic-below boundary)"
        return [Failure(t.code, f"[{r.context}] turn N is not a prefix of turn N+1 ({t.next}) {where}: they "
                        f"share {t.shared_tokens} of turn N's {t.prefix_tokens} tokens: {t.base_excerpt!r} -> "
                        f"{t.next_excerpt!r}", loc.file if loc else str(self.path), loc.line if loc else None)]


def load_context(path: str | Path) -> dict[str, Any]:
    """A context file (a JSON object). Raises ConfigError naming the file (and line) when it
    is missing, a folder, not UTF-8 text, not valid JSON (truncated) or not an object."""
    data = read_json(path, "context file")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a context must be a JSON object, got {type(data).__name__}")
    return data
