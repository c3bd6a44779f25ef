"""The streaming lint engine: reusable prefix per request, causes, and the waterfall.

Feed :class:`~prefixcache.analyzer.prepare.Prepared` requests in arrival order;
each yields a :class:`RequestResult` at once (nothing waits for the end of the run).

Per request ``r`` with ``n`` prompt tokens:

* **Reusable prefix** ``p``: the longest token prefix ``r`` shares with ANY earlier
  request of the run (radix index, :class:`prefixcache.analyzer.cache.index.radix.PrefixIndex`), the request
  that was (``shared_with``), and the block-aligned figure vLLM could serve
  (``⌊min(p, n−1)/B⌋·B``).
* **Break**: ``r`` is compared with the previous request ``q`` of its own session.
  If ``q``'s prompt is not a prefix of ``r``'s, the first divergence is located and
  explained by the pair rules. (Comparing with ``q`` rather than with the best match
  is what catches a request that returns to an older state: its best match is the
  older request, but the tokens the session computed last were still thrown away.)
  The first request of a session is compared with its best match in another
  session (PC602 only). Lint holds each session's last request and the
  :data:`OWNERS` most recent others that may still own a prefix (one whose whole
  prompt a later request extends owns none and is dropped), and of every other
  only where its system prompt and tools end and its length (tokens): a pair that
  differs after them cannot be PC602, so it is judged without the text. Only a
  best match older than the window that differs inside its system prompt or tools
  is not compared. Memory so grows by a few ints a request, not by prompts.
* **Lost-token attribution** (the waterfall): ``n = reusable + lost + new``.
  ``lost = max(0, min(n, len(q)) − p)`` — tokens the session had already computed
  (they lie within the length of ``q``'s prompt) that are not reusable — all
  attributed to the primary (first) finding's code. Tokens beyond ``len(q)`` are
  ``new`` (the appended turn). Divergences with no finding (the previous request
  ended in a generation prompt its answer replaced) count as new. For PC602 the
  lost tokens are those of this request's system prompt and tools after the
  divergence. Block traces (hash ids only) get reusable figures by block, and
  PC002 (cause unknown: no text) with the same ``lost`` formula when a request's hash
  chain does not extend its predecessor's (:mod:`prefixcache.analyzer.cache.index.trace_sessions`;
  Mooncake sessions are inferred from the chains).
* **Idle gaps past the TTL** (``ttl``, off by default): with a TTL (``Linter(ttl=...)``,
  ``lint --ttl``: seconds, or ``provider``: the logged model's hosted provider's default
  retention, :func:`~prefixcache.analyzer.lint.rules.provider.provider_ttl`, none for
  engines), a request whose idle gap after the previous request of its session
  (:func:`~prefixcache.analyzer.cache.workload.idle_gap`: that request's logged time to this
  one's send time, the clock ``simulate`` expires entries on) exceeds the TTL finds its
  prefix expired: its ``p`` reusable tokens are lost to :data:`TTL` (``ttl_tokens``) and
  reusable becomes 0. Drift keeps its own cause: the tokens after the break stay lost to
  the finding's code, so ``lost = ttl_tokens + (min(n, len(q)) − p)`` and ``new`` is
  unchanged. ``ttl`` is a cause, not a rule: it raises no finding (a prompt cannot fix
  idle time). Not applied to a session's first request (no previous request: no gap
  known), to block-hash traces, or when either logged time is missing.
* **Advice** follows who controls the fix (:mod:`prefixcache.analyzer.lint.rules.control`):
  template and tokenizer fixes (PC5xx) for a hosted API say what the user can do instead
  of "choose another template"; prompts an agent harness built say so.
* **Usage-only requests** (:attr:`Prepared.usage_only`: the log kept the provider's
  token counts but not the prompt, e.g. OpenHands trajectories) get no content
  figures at all (``None``) and no findings; their reported prompt and cached
  tokens are kept apart (:attr:`Waterfall.usage_only_prompt_tokens`), so the
  reusable fractions stay computed from logged prompts only.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE, servable_tokens
from prefixcache.analyzer.cache.index.radix import PrefixIndex
from prefixcache.analyzer.cache.workload import SimRequest, idle_gap
from prefixcache.analyzer.prepare import Prepared
from prefixcache.analyzer.cache.index.chains import ChainIndex
from prefixcache.analyzer.lint.locate import locate
from prefixcache.analyzer.sequence import arrival_order, common_prefix_len
from prefixcache.analyzer.lint.rules import REGISTRY, RULES, Finding, PairContext, Rule, classify
from prefixcache.analyzer.lint.rules.base import TTL, TTL_NAME  # noqa: F401 (re-exported: the idle-gap loss cause and its name)
from prefixcache.analyzer.lint.rules.control import advice, control_of, control_severity
from prefixcache.analyzer.lint.rules.provider import provider_ttl, static_end_tokens
from prefixcache.analyzer.lint.rules.trace import TRACE_DIVERGENCE
from prefixcache.analyzer.cache.index.trace_sessions import SESSIONLESS_FORMATS, TraceSessions, chain_break
from prefixcache.analyzer.lint.held import HeldLast
from prefixcache.analyzer.model import RenderedPrompt, Request, compact_ids


#: How many earlier requests (besides each session's last) lint keeps to judge a session's first
#: request against its best match (PC602); an older best match is not compared.
OWNERS = 1024
#: How many of the latest requests lint keeps the rendering of (a held request's rendering is
#: otherwise dropped, and rendered again when a break is explained against it).
RENDERINGS = 256



@dataclass(frozen=True, slots=True)
class RequestResult:
    """Lint figures for one request (tokens). ``shared_with`` is the (session,
    index) of the earlier request sharing the longest prefix; ``compared_with``
    the request the break was judged against; ``lost_code`` the code the lost
    tokens are attributed to. ``exact`` is False for approximate tokenizers and
    None for a block-hash trace request (no tokenizer: its counts are the trace's).
    ``line`` is the 1-based line of the log file where the record starts (None
    inside one JSON document). ``ttl_tokens``: the part of ``lost_tokens`` lost to
    :data:`TTL` (the prefix expired in an idle gap; ``lost_code`` names the rest).
    ``reported_prompt_tokens`` / ``reported_cached_tokens``
    are the provider's own counts when the log has them. For a usage-only request
    (``usage_only``: prompt not logged) the content figures (``prompt_tokens`` …
    ``lost_tokens``) are None: nothing about its prefix can be known."""

    session: str
    index: int
    source: str
    record: int
    model: str | None
    prompt_tokens: int | None
    reusable_tokens: int | None
    reusable_block_tokens: int | None
    new_tokens: int | None
    lost_tokens: int | None
    lost_code: str | None
    shared_with: tuple[str, int] | None
    compared_with: tuple[str, int] | None
    findings: tuple[Finding, ...]
    exact: bool | None = True
    line: int | None = None
    usage_only: bool = False
    reported_prompt_tokens: int | None = None
    reported_cached_tokens: int | None = None
    ttl_tokens: int | None = 0

    @property
    def reusable_fraction(self) -> float | None:
        """Reusable / prompt tokens (0.0 for an empty prompt, None for usage-only)."""
        if self.usage_only:
            return None
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(slots=True)
class Waterfall:
    """Totals for a session or the run (tokens): ``prompt = reusable + lost + new``.

    ``requests`` counts every request; the token figures cover only requests
    whose prompt was logged. Usage-only requests are counted apart:
    ``usage_only_requests``, the prompt and cached tokens their log reports
    (``usage_only_cached_tokens`` sums the ``usage_only_cached_reported``
    requests that report a cached count, whose prompts total
    ``usage_only_cached_base`` tokens). Lost tokens and findings by code are kept as
    ``(code, count)`` pairs in first-seen order (a run has one waterfall a session: a
    tuple of one pair is about half a one-key dict) and read as Counters.
    """

    requests: int = 0
    prompt_tokens: int = 0
    reusable_tokens: int = 0
    reusable_block_tokens: int = 0
    new_tokens: int = 0
    lost_pairs: tuple[tuple[str, int], ...] = ()
    finding_pairs: tuple[tuple[str, int], ...] = ()
    usage_only_requests: int = 0
    usage_only_prompt_tokens: int = 0
    usage_only_cached_tokens: int = 0
    usage_only_cached_reported: int = 0
    usage_only_cached_base: int = 0

    @property
    def content_requests(self) -> int:
        """Requests whose prompt content was analysed."""
        return self.requests - self.usage_only_requests

    @property
    def lost_tokens_by_code(self) -> Counter:
        """Lost tokens by the code they are attributed to (a new Counter, first-seen order)."""
        return Counter(dict(self.lost_pairs))

    @property
    def findings_by_code(self) -> Counter:
        """Reported findings by code (a new Counter, first-seen order)."""
        return Counter(dict(self.finding_pairs))

    @property
    def lost_tokens(self) -> int:
        return sum(n for _, n in self.lost_pairs)

    @property
    def ttl_tokens(self) -> int:
        """Lost tokens whose prefix expired in an idle gap past the TTL (:data:`TTL`)."""
        return dict(self.lost_pairs).get(TTL, 0)

    @property
    def reusable_fraction(self) -> float:
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def usage_only_cached_fraction(self) -> float | None:
        """Reported cached / reported prompt tokens of the usage-only requests that
        report both (None when none does)."""
        if not self.usage_only_cached_base:
            return None
        return self.usage_only_cached_tokens / self.usage_only_cached_base

    def add(self, res: RequestResult) -> None:
        self.requests += 1
        if res.usage_only:
            self.usage_only_requests += 1
            self.usage_only_prompt_tokens += res.reported_prompt_tokens or 0
            if res.reported_cached_tokens is not None:
                self.usage_only_cached_tokens += res.reported_cached_tokens
                self.usage_only_cached_reported += 1
                self.usage_only_cached_base += res.reported_prompt_tokens or 0
            return
        self.prompt_tokens += res.prompt_tokens
        self.reusable_tokens += res.reusable_tokens
        self.reusable_block_tokens += res.reusable_block_tokens
        self.new_tokens += res.new_tokens
        if res.lost_tokens:
            drift = res.lost_tokens - (res.ttl_tokens or 0)
            if drift:
                self.lost_pairs = _bump(self.lost_pairs, res.lost_code or "PC001", drift)
            if res.ttl_tokens:
                self.lost_pairs = _bump(self.lost_pairs, TTL, res.ttl_tokens)
        for f in res.findings:
            self.finding_pairs = _bump(self.finding_pairs, f.code, 1)


def _bump(pairs: tuple[tuple[str, int], ...], code: str, n: int) -> tuple[tuple[str, int], ...]:
    """``pairs`` with ``n`` added to ``code``'s count (appended when new)."""
    for i, (c, k) in enumerate(pairs):
        if c == code:
            return (*pairs[:i], (c, k + n), *pairs[i + 1:])
    return (*pairs, (code, n))


def select_rules(select: Sequence[str] = (), ignore: Sequence[str] = ()) -> tuple[Rule, ...]:
    """Rules enabled by ``select`` (empty = all) minus ``ignore``.

    A selector is a code or code prefix (``PC101``, ``PC1``), a rule name
    (``volatile-timestamp``) or a group name (``volatile``, ``tools``, as
    ``prefixcache rules`` lists them); case-insensitive. Raises KeyError for a
    selector matching no rule.
    """
    def matches(rule: Rule, sel: str) -> bool:
        s = sel.strip()
        return rule.code.startswith(s.upper()) or s.lower() in (rule.name, rule.group)
    for sel in (*select, *ignore):
        if not sel.strip() or not any(matches(r, sel) for r in RULES):
            groups = sorted({r.group for r in RULES if r.group != "-"})
            raise KeyError(f"no rule matches {sel!r} (codes like PC101 or PC1, rule names, or groups: "
                           f"{', '.join(groups)})")
    chosen = [r for r in RULES if not select or any(matches(r, s) for s in select)]
    return tuple(r for r in chosen if not any(matches(r, s) for s in ignore))


class Linter:
    """Streaming lint over one run of requests (all sessions share one radix index).

    ``block_size`` (tokens) sets the block-aligned figure; ``rules`` the enabled
    rules (default all). Divergences are always classified with every pair rule,
    so the waterfall attributes lost tokens to the true first cause even when its
    rule is not selected; only the reported findings are filtered. ``redact``
    replaces excerpts with lengths and hashes; ``severity`` overrides severities
    by code (``{"PC502": "warning"}``). ``owners`` bounds the earlier requests held for
    first-of-session comparisons (:data:`OWNERS`); ``render`` (the request's renderer, as
    the preparer used it) lets held requests drop their rendering and redo it when compared (the
    renderings of the :data:`RENDERINGS` latest requests are kept: a break is mostly explained against
    its session's previous request).
    ``ttl``: the idle TTL (seconds; ``"provider"``: each request's hosted provider's default,
    none for engines; None: off) past which a prefix is lost to :data:`TTL` (module docstring).
    """

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE, rules: Sequence[Rule] = RULES, redact: bool = False,
                 severity: Mapping[str, str] | None = None, owners: int = OWNERS,
                 render: Callable[[Request], RenderedPrompt] | None = None, ttl: float | str | None = None) -> None:
        if block_size < 1:
            raise ValueError(f"block size must be >= 1, got {block_size}")
        self.block_size = block_size
        #: Block sizes of the block-aligned figures so far (tokens): ``block_size`` for token
        #: requests, each trace's own block size for block-hash traces.
        self.block_sizes: set[int] = set()
        self.rules = tuple(rules)
        self._enabled = frozenset(r.code for r in self.rules)
        self._pair_rules = tuple(r for r in RULES if r.scope == "pair")
        self._request_rules = tuple(r for r in self.rules if r.scope == "request")
        self.redact = redact
        self.ttl = ttl
        self._severity = {k.upper(): v for k, v in (severity or {}).items()}
        self._index = PrefixIndex()
        #: Trace requests' chains (:class:`ChainIndex`); its owners are trace request numbers: session
        #: number (``_trace_of``, into ``_trace_names``) and index (``_trace_index``) of each.
        self._traces = ChainIndex()
        self._trace_of, self._trace_index = array("i"), array("i")
        self._trace_names: list[str] = []
        self._trace_numbers: dict[str, int] = {}
        self._trace_sessions = TraceSessions()
        #: When a caller asks (an ``array("q")``, :class:`DriftCauses`): each trace request's drift extent in
        #: feed order, the tokens its session's previous request overlapped it when it broke that chain
        #: (else 0), what the simulator's baseline would infer the sessions again to find.
        self.trace_overlaps: array | None = None
        #: Each trace session's last request, by session number: its compact hash chain (None
        #: before the first), index, input tokens and block size.
        self._last_chain: list[array | None] = []
        self._last_index, self._last_tokens, self._last_block = array("i"), array("q"), array("q")
        self.owners = owners
        self._render = render
        #: The renderings of the :data:`RENDERINGS` latest requests, by (session, index): a break is
        #: mostly explained against its session's previous request, so it is seldom rendered again.
        self._renderings: OrderedDict[tuple[str, int], RenderedPrompt] = OrderedDict()
        #: Earlier token requests, not their session's last, that may still own a radix node
        #: (what a session's first request is judged against): the ``owners`` most recent.
        self._older: OrderedDict[tuple[str, int], Prepared] = OrderedDict()
        self._dead: set[tuple[str, int]] = set()  # requests that own nothing any more
        #: Every earlier request that may still own a prefix → (end of its system prompt and tools,
        #: prompt length), in tokens: enough to judge a first request whose match goes past them.
        self._ends: dict[tuple[str, int], tuple[int, int]] = {}
        #: Each session's latest request (the most recent sessions in memory, the rest on disk: :class:`HeldLast`).
        self._last: HeldLast = HeldLast()
        self._state: dict = {"redact": redact}
        self.total = Waterfall()
        self.sessions: dict[str, Waterfall] = {}
        #: Whether :meth:`feed` adds each result to :attr:`total` and :attr:`sessions` (a caller that
        #: reads only the results, :class:`DriftCauses`, turns it off: no waterfall a session).
        self.tally = True

    def run(self, prepared: Iterable[Prepared]) -> Iterator[RequestResult]:
        """Lint a stream of prepared requests, yielding one result per request."""
        for p in prepared:
            yield self.feed(p)

    def feed(self, p: Prepared) -> RequestResult:
        """Lint one request (arrival order), update the index and the waterfall."""
        req = p.request
        if p.usage_only:
            res = self._feed_usage_only(p)
        elif p.tokens is None:
            res = self._feed_trace(p)
        else:
            res = self._feed_tokens(p)
        if not p.usage_only:
            self._retire(self._last.get(req.session))
            self._last[req.session] = self._slim(p)
        if self.tally:
            self.total.add(res)
            self.sessions.setdefault(res.session, Waterfall()).add(res)
        return res

    def _feed_usage_only(self, p: Prepared) -> RequestResult:
        """No prompt logged: no prefix, no findings, only the reported counts.
        The previous request of the session stays the last one with content."""
        req = p.request
        usage = req.usage
        return RequestResult(
            session=req.session, index=req.index, source=req.provenance.source, record=req.provenance.record,
            model=req.model, prompt_tokens=None, reusable_tokens=None, reusable_block_tokens=None,
            new_tokens=None, lost_tokens=None, lost_code=None, shared_with=None, compared_with=None, findings=(),
            line=req.provenance.line, usage_only=True, ttl_tokens=None,
            reported_prompt_tokens=usage.prompt_tokens if usage is not None else None,
            reported_cached_tokens=usage.cached_tokens if usage is not None else None,
        )

    def _feed_trace(self, p: Prepared) -> RequestResult:
        """A block-hash trace request: reusable prefix by block over the run, and PC002 when
        it does not extend the previous request of its session (inferred for sessionless
        formats, :mod:`prefixcache.analyzer.cache.index.trace_sessions`)."""
        req, n = p.request, p.prompt_tokens
        trace = req.trace
        if trace is None:
            return self._result(p, 0, None, None, 0, None, ())
        ids = compact_ids(trace.hash_ids)  # one compact chain, shared by the index, sessions and last requests
        session, index = (self._trace_sessions.assign(ids, req.session, trace.block_size)
                          if req.format in SESSIONLESS_FORMATS and not req.messages
                          else (req.session, req.index))
        s = self._trace_session(session)
        length, number = self._traces.insert(ids, self._trace_owner(s, index))
        shared = min(length * trace.block_size, n)
        owner = None if number is None else (self._trace_names[self._trace_of[number]], self._trace_index[number])
        prev, prev_index, prev_tokens = self._last_chain[s], self._last_index[s], self._last_tokens[s]
        prev_block = self._last_block[s]
        self._last_chain[s], self._last_index[s] = ids, index
        self._last_tokens[s], self._last_block[s] = trace.input_length, trace.block_size
        lost, findings, compared, brk = 0, (), None, None
        if prev is not None:
            compared = (session, prev_index)
            brk = chain_break(ids, prev, prev_tokens, prev_block)
            if brk is not None:
                lost = max(0, min(n, prev_tokens) - shared)
                f = TRACE_DIVERGENCE.finding(req, session, index, brk, lost, compared, len(prev))
                findings = self._kept([f])
        if self.trace_overlaps is not None:
            self.trace_overlaps.append(0 if brk is None else min(n, prev_tokens))
        return self._result(p, shared, owner, compared, lost, TRACE_DIVERGENCE.code if lost else None, findings,
                            name=(session, index))

    def _trace_session(self, session: str) -> int:
        """The number of trace session ``session`` (a new one gets the next number)."""
        number = self._trace_numbers.get(session)
        if number is None:
            number = self._trace_numbers[session] = len(self._trace_names)
            self._trace_names.append(session)
            self._last_chain.append(None)
            for column in (self._last_index, self._last_tokens, self._last_block):
                column.append(0)
        return number

    def _trace_owner(self, session: int, index: int) -> int:
        """The number of the next trace request (session number ``session``, ``index``), as the chain
        index's owner."""
        self._trace_of.append(session)
        self._trace_index.append(index)
        return len(self._trace_index) - 1

    def _feed_tokens(self, p: Prepared) -> RequestResult:
        req, ids = p.request, compact_ids(p.tokens.ids)
        n = len(ids)
        match = self._index.insert(ids, (req.session, req.index))
        shared, owner = match.length, match.owner
        prev = self._last.get(req.session)
        findings: list[Finding] = []
        lost, compared = 0, None
        if prev is not None and prev.tokens is not None:
            compared = (prev.request.session, prev.request.index)
            d = common_prefix_len(ids, compact_ids(prev.tokens.ids))
            if d < len(prev.tokens.ids):
                findings = self._explain(p, prev, d)
                if findings:
                    lost = max(0, min(n, len(prev.tokens.ids)) - shared)
            else:
                self._release(compared)
        elif owner is not None and (other := self._owner(owner)) is not None:
            compared = owner
            findings = self._explain(p, other, shared)
            if findings:
                lost = max(0, static_end_tokens(p) - shared)
            if shared == len(other.tokens.ids):
                self._release(owner)
        elif owner is not None and owner[0] != req.session and owner in self._ends:
            static_end, length = self._ends[owner]
            if shared >= static_end:  # the pair differs after the owner's system prompt and tools: no PC602,
                compared = owner      # the one cross-session rule (classify), so its text is not needed
                if shared == length:
                    self._release(owner)
        self._state["shared"] = shared
        singles = [f for rule in self._request_rules for f in rule.check_request(p, self._state)]
        lost_code = findings[0].code if lost and findings else None
        expired = shared if shared and prev is not None and self._expired(prev.request, req) else 0
        if findings:
            findings[0] = dataclasses.replace(findings[0], lost_tokens=lost)
        control = control_of(req)
        findings, singles = ([dataclasses.replace(f, fix=advice(f.code, f.fix, control) if f.fix == REGISTRY[f.code].fix
                                                  else f.fix, severity=control_severity(f.code, f.severity, control))
                              for f in group] for group in (findings, singles))
        return self._result(p, shared, owner, compared, lost, lost_code, self._kept(findings, singles), expired=expired)

    def _expired(self, prev: Request, req: Request) -> bool:
        """Whether the idle gap from ``prev`` to ``req`` (:func:`idle_gap`, seconds) is longer
        than the TTL that applies to ``req`` (``ttl``, or its provider's default)."""
        ttl = provider_ttl(req.model) if self.ttl == "provider" else self.ttl
        if ttl is None:
            return False
        gap = idle_gap(prev, req)
        return gap is not None and gap > float(ttl)

    def _owner(self, key: tuple[str, int]) -> Prepared | None:
        """The earlier token request named ``key`` (a radix owner), when still held."""
        last = self._last.get(key[0])
        if last is not None and last.tokens is not None and (last.request.session, last.request.index) == key:
            return last
        return self._older.get(key)

    def _release(self, key: tuple[str, int]) -> None:
        """Forget an earlier request whose prompt is a prefix of the one just inserted: that
        insert covered every radix node it owned, so it can never be an owner again (a
        session's last request stays in ``_last`` for the session's next break)."""
        self._older.pop(key, None)
        self._ends.pop(key, None)
        self._dead.add(key)

    def _retire(self, prev: Prepared | None) -> None:
        """``prev`` is no longer its session's last request: keep it among the ``owners``
        most recent possible owners, unless it owns nothing any more."""
        if prev is None or prev.tokens is None:
            return
        key = (prev.request.session, prev.request.index)
        if key in self._dead:
            self._dead.discard(key)
            return
        self._older[key] = prev
        self._ends[key] = (static_end_tokens(prev), len(prev.tokens.ids))
        while len(self._older) > self.owners:
            self._older.popitem(last=False)

    def _kept(self, findings: list[Finding], singles: Sequence[Finding] = ()) -> tuple[Finding, ...]:
        """The reported findings: enabled pair findings, then request findings, severities overridden."""
        kept = [f for f in findings if f.code in self._enabled] + list(singles)
        if self._severity:
            kept = [dataclasses.replace(f, severity=self._severity.get(f.code, f.severity)) for f in kept]
        return tuple(kept)

    def _slim(self, p: Prepared) -> Prepared:
        """``p`` as held for later comparisons: without its rendering when ``render`` can
        redo it (the rendering is a pure function of the request)."""
        if self._render is None or p.tokens is None or p.rendered is None:
            return p
        kept = self._renderings
        kept[(p.request.session, p.request.index)] = p.rendered
        if len(kept) > RENDERINGS:
            kept.popitem(last=False)
        return dataclasses.replace(p, rendered=None)

    def _explain(self, p: Prepared, other: Prepared, token: int) -> list[Finding]:
        if other.rendered is None and other.tokens is not None and self._render is not None:
            key = (other.request.session, other.request.index)
            rendered = self._renderings.get(key)
            other = dataclasses.replace(other, rendered=rendered if rendered is not None else self._render(other.request))
        div = locate(p.request, p.rendered, p.tokens, other.rendered, other.tokens, token, redact=self.redact)
        return classify(PairContext(p, other, div, redact=self.redact), self._pair_rules)

    def _result(self, p: Prepared, shared: int, owner, compared, lost: int, lost_code: str | None,
                findings: tuple[Finding, ...], name: tuple[str, int] | None = None,
                expired: int = 0) -> RequestResult:
        """The result; ``expired``: reusable tokens lost to :data:`TTL` (moved from reusable to lost)."""
        req, n = p.request, p.prompt_tokens
        session, index = name or (req.session, req.index)
        block = self.block_size if p.tokens is not None or req.trace is None else req.trace.block_size
        if p.tokens is not None or req.trace is not None:
            self.block_sizes.add(block)
        usage = req.usage
        return RequestResult(
            session=session, index=index, source=req.provenance.source, record=req.provenance.record,
            model=req.model, prompt_tokens=n, reusable_tokens=shared - expired,
            reusable_block_tokens=(servable_tokens(shared - expired, n, block)
                                   if p.tokens is not None or req.trace is not None else shared - expired),
            new_tokens=n - shared - lost, lost_tokens=lost + expired, lost_code=lost_code,
            shared_with=tuple(owner) if owner else None, compared_with=compared, findings=findings,
            exact=p.tokens.exact if p.tokens is not None else (None if req.trace is not None else True),
            line=req.provenance.line,
            reported_prompt_tokens=usage.prompt_tokens if usage is not None else None,
            reported_cached_tokens=usage.cached_tokens if usage is not None else None, ttl_tokens=expired,
        )


class DriftCauses:
    """:func:`drift_causes` one prepared request at a time, so the caller need not hold them:
    :meth:`feed` each in arrival order, then :meth:`of` the simulator's requests. ``render``
    (a request's rendering, as its preparer makes it) lets the requests held for later
    comparisons drop their renderings (:class:`Linter`'s ``render``)."""

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE, render: Callable[[Request], RenderedPrompt] | None = None
                 ) -> None:
        self._linter = Linter(block_size=block_size, render=render)
        self._linter.trace_overlaps = array("q")
        self._linter.tally = False
        self._codes: dict[tuple[str, int], str] = {}

    def feed(self, p: Prepared) -> None:
        """Lint one request (arrival order); usage-only ones are not simulated: skipped."""
        if p.tokens is None and p.request.trace is None:
            return
        self.record(p, self._linter.feed(p))

    def record(self, p: Prepared, res: RequestResult) -> None:
        """Keep the code of ``res``, the result another :class:`Linter` gave ``p`` in the same
        arrival order (``prefixcache report`` passes lint's own: the code a loss is attributed to
        does not depend on the rules selected, the severities or the block size, so it is the one
        :meth:`feed` would find)."""
        if res.lost_code and res.lost_tokens:  # keyed by the reader's names (a Mooncake session is inferred)
            self._codes[(p.request.session, p.request.index)] = res.lost_code

    @property
    def trace_overlaps(self) -> Sequence[int]:
        """Each block-trace request's drift extent (tokens), in the order fed: what
        :func:`~prefixcache.analyzer.cache.simulate.simulator.baseline` takes as ``trace_overlaps``."""
        return self._linter.trace_overlaps  # type: ignore[return-value]

    def of(self, reqs: Sequence[SimRequest]) -> dict[int, str]:
        """Request order → rule code, for the requests fed."""
        codes = self._codes
        return {r.order: codes[(r.session, r.index)] for r in reqs if (r.session, r.index) in codes}


def drift_causes(items: Iterable, reqs: Sequence[SimRequest], block_size: int = DEFAULT_BLOCK_SIZE) -> dict[int, str]:
    """Name the rule behind each simulated request's drift: request order → the code
    :class:`Linter` attributes its lost tokens to (``lost_code``, e.g. ``PC101``; ``PC002``
    for a block-trace request that does not extend its session's previous one).

    ``items`` are the prepared requests in input order (linted in the one arrival order), ``reqs`` the simulator's
    requests built from them; ``block_size`` in tokens (it sets only the block-aligned
    figure, never which rule a loss is attributed to)."""
    causes = DriftCauses(block_size)
    for _, p in arrival_order(items, lambda p: p.request.timestamp):  # the order lint and simulate walk
        causes.feed(p)
    return causes.of(reqs)
