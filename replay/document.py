"""The replay summaries (``replay --json``, in-process and ``--server``) as library types, and the outcome of a run.

Each document is a frozen dataclass whose fields are the JSON keys in output order;
``orjson.dumps(report)`` is the document byte for byte. The two stacks measure
different things, so they publish two documents (``docs/schemas/replay.schema.json``:
:class:`ReplayReport`; ``replay-server.schema.json``: :class:`ServerReport`); every
latency in both is a :class:`~prefixcache.analyzer.stats.Distribution`. A run of
either stack ends in one :class:`ReplayOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence

from prefixcache.analyzer.model import Skipped
from prefixcache.analyzer.replay_rows import LocalRow, ReplayRow
from prefixcache.analyzer.cache.simulate.survival import Survival
from prefixcache.analyzer.serving import ServingFigures
from prefixcache.analyzer.stats import Distribution


@dataclass(frozen=True, slots=True)
class PassSummary:
    """Figures of one in-process pass (one row of the replay summary's ``passes``).
    Tokens are sums over its requests; times are seconds; ``kv_bytes_peak`` bytes.

    ``ttft``: the requests' TTFT distribution (seconds, unrounded). ``ttft_p50`` /
    ``ttft_p95`` / ``ttft_p99`` are ``ttft.p50`` / ``p95`` / ``p99`` under their old flat
    names: deprecated, kept for one release. ``effective_tok_s`` = prompt tokens served
    per second of TTFT (cached ones included). ``speedup`` = the cold pass's TTFT summed
    over the same request positions / this pass's total TTFT (None without a cold pass);
    ``simulator_equal`` is True when every request's cached tokens equal the simulator's
    prediction (None in the cold pass). ``avoided_prefill`` = cached tokens (prefill not
    computed); ``hit_rate`` = cached share of prompt tokens (0–1).
    """

    pass_name: str
    requests: int
    prompt_tokens: int
    cached_tokens: int
    computed_tokens: int
    ttft: Distribution
    ttft_p50: float
    ttft_p95: float
    ttft_p99: float
    ttft_total: float
    effective_tok_s: float
    kv_bytes_peak: int
    verified: int
    mismatches: int
    max_abs_dlogit: float | None
    simulator_equal: bool | None
    speedup: float | None
    avoided_prefill: int
    hit_rate: float

    @classmethod
    def of(cls, pass_name: str, rows: Iterable[LocalRow], cold: dict[int, float] | None = None) -> "PassSummary":
        """Summarize ``pass_name``'s rows; ``cold`` maps position → cold TTFT (seconds)."""
        rs = [r for r in rows if r.pass_name == pass_name]
        ttft = [r.ttft_s for r in rs]
        dist = Distribution.of(ttft, digits=None)
        dl = [r.max_abs_dlogit for r in rs if r.max_abs_dlogit is not None]
        preds = [r.predicted_cached for r in rs if r.predicted_cached is not None]
        total = sum(ttft)
        prompt, cached = sum(r.prompt_tokens for r in rs), sum(r.cached_tokens for r in rs)
        speedup = None
        if cold and pass_name != "cold" and total > 0 and all(r.position in cold for r in rs):
            speedup = sum(cold[r.position] for r in rs) / total
        p50, p95, p99 = dist.flat()
        return cls(
            pass_name=pass_name, requests=len(rs), prompt_tokens=prompt, cached_tokens=cached,
            computed_tokens=sum(r.computed_tokens for r in rs), ttft=dist, ttft_p50=p50, ttft_p95=p95, ttft_p99=p99,
            ttft_total=total, effective_tok_s=prompt / total if total > 0 else 0.0,
            kv_bytes_peak=max((r.kv_bytes for r in rs), default=0),
            verified=sum(r.verified for r in rs), mismatches=sum(r.mismatch for r in rs),
            max_abs_dlogit=max(dl) if dl else None,
            simulator_equal=(all(r.predicted_cached == r.cached_tokens for r in rs) if preds else None),
            speedup=speedup, avoided_prefill=cached, hit_rate=cached / prompt if prompt else 0.0,
        )


def summarize(rows: Sequence[LocalRow], passes: Sequence[str]) -> list[PassSummary]:
    """One summary per pass that has rows, speedups against ``cold`` when it ran."""
    cold = {r.position: r.ttft_s for r in rows if r.pass_name == "cold"}
    return [PassSummary.of(p, rows, cold) for p in passes if any(r.pass_name == p for r in rows)]


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The summary of one in-process replay run (``prefixcache replay --json``).

    ``model`` / ``device`` / ``dtype``: the engine's display name, device (as the engine
    names it, e.g. ``cpu``, ``cuda:0``) and element type. ``block_size`` (tokens),
    ``policy``, ``capacity_blocks`` (blocks; None = unbounded): the cache index of the
    cache passes. ``requests``: original prompts replayed; ``run``: the settings digest
    every JSONL row carries; ``template``: the ``--template`` given (``model`` = the
    model's own); ``repeat``: prefills timed per request. ``max_prompt_tokens`` (tokens;
    None = no bound) and the counts of prompts it truncated (original, canonical);
    ``dropped_hidden_prefixes``: prompts replayed without a hidden (opaque) prefix the
    log does not contain; ``skipped_records``: input records not turned into requests;
    ``warnings``: the renderer's warnings, one per kind (its latest instance; lint rule
    PC503). ``passes``: one :class:`PassSummary` per pass that ran; ``interrupted``: the
    run was stopped (Ctrl-C) and the passes cover the requests that finished.
    """

    model: str
    device: str
    dtype: str
    block_size: int
    policy: str
    requests: int
    run: str
    template: str
    repeat: int
    capacity_blocks: int | None
    max_prompt_tokens: int | None
    truncated_prompts: int
    truncated_canonical_prompts: int
    dropped_hidden_prefixes: int
    skipped_records: int
    warnings: tuple[str, ...]
    passes: tuple[PassSummary, ...]
    interrupted: bool


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """A detected server (JSON-ready; part of the server replay report).

    ``kind``: one of :data:`prefixcache.replay.server.kinds.KINDS`; ``model``: the served
    model name requests must name; ``root``: where the server loaded it from (a folder,
    when it says); ``max_context``: tokens (None = not published). Cache: ``block_size``
    (tokens per KV block / page; 1 = token-granular), ``num_blocks`` (KV blocks the engine
    allocated; None = unknown), ``hash_algo`` (vLLM's prefix-caching hash),
    ``prefix_caching`` (False when the engine says it is off), ``slots`` (llama.cpp
    parallel slots). ``metrics``: ``/metrics`` answers. ``version``: the engine's version
    string when published.
    """

    kind: str
    url: str
    model: str
    root: str | None
    max_context: int | None
    block_size: int | None
    num_blocks: int | None
    hash_algo: str | None
    prefix_caching: bool | None
    slots: int | None
    metrics: bool
    version: str | None


@dataclass(frozen=True, slots=True)
class ServerPassSummary:
    """One pass through a server. ``reset``: the cache was emptied (cold: before every
    request; else once at the start; False = no reset endpoint, so predictions assume an
    empty cache the engine may not have); ``refused``: why the pass did not run. Tokens are
    sums over the requests that succeeded; ``reconciled`` / ``differing`` / ``unreported``
    count requests whose engine cached tokens equal / differ from the prediction / were not
    reported. Latencies (seconds, 6 decimals) are :class:`~prefixcache.analyzer.stats.Distribution`
    values over the measured requests (warm-up left out): ``ttft`` / ``tpot`` / ``itl`` /
    ``e2e`` are ``serving``'s, ``queue`` the client-side wait (send − ready). ``wall_s`` the
    pass's wall time (cache reset and /metrics scrapes included); ``requests_per_s`` and
    ``output_tok_s`` are ``serving``'s request and output throughput (over its duration).
    ``failures``: failed requests by reason. ``metrics``: the engine's counters grown during
    the pass (tokens / requests); ``metrics_hit_rate`` their hits ÷ queries (a ratio of
    sums); ``metrics_equal``: the hit counter grew by exactly the sum of the per-request
    cached tokens (None without the counter). ``engine_ttft_mean``: the engine's own TTFT
    histogram mean over the pass (seconds; vLLM), for the harness overhead;
    ``engine_queue_mean``: its time-in-queue histogram mean (seconds; vLLM). ``unsent``:
    requests not sent (``--duration`` ran out or the server went away). ``serving``: the
    figures ``vllm bench serve`` reports, defined as it defines them
    (:class:`~prefixcache.analyzer.serving.ServingFigures`: percentiles, throughputs, goodput
    under ``--slo``, in-flight at send, cached tokens and hit ratio per second)."""

    pass_name: str
    reset: bool | None
    refused: str | None
    requests: int
    ok: int
    failed: int
    prompt_tokens: int
    engine_prompt_tokens: int
    cached_tokens: int
    predicted_cached: int
    reconciled: int
    differing: int
    unreported: int
    hit_rate: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    queue: Distribution
    wall_s: float
    requests_per_s: float
    output_tok_s: float
    evicted_blocks: int
    failures: dict[str, int]
    metrics: dict[str, int]
    metrics_hit_rate: float | None
    metrics_equal: bool | None
    engine_ttft_mean: float | None
    engine_queue_mean: float | None
    unsent: int
    serving: ServingFigures


@dataclass(frozen=True, slots=True)
class Difference:
    """A request whose engine cached tokens differ from the prediction: ``by`` = engine −
    predicted (tokens), ``fact`` the engine behaviour that explains it (or ``unexplained``)."""

    pass_name: str
    position: int
    source: str
    record: int
    cached_tokens: int | None
    predicted_cached: int | None
    by: int | None
    fact: str


@dataclass(frozen=True, slots=True)
class PromptMismatch:
    """PC504: with ``--send chat`` the engine counted ``engine_prompt_tokens`` where our
    template and tokenizer give ``prompt_tokens`` (``by`` = engine − ours)."""

    code: str
    pass_name: str
    position: int
    source: str
    record: int
    prompt_tokens: int
    engine_prompt_tokens: int
    by: int


@dataclass(frozen=True, slots=True)
class KVEventsReport:
    """What the engine's KV events said during a server replay (``--kv-events``;
    :mod:`prefixcache.replay.server.ledger`). ``endpoint``: the publisher; ``batches`` /
    ``events`` received (``stored`` / ``removed`` / ``cleared`` by type), ``missing_batches``
    (batch numbers skipped: events lost), ``unmapped_blocks`` (stored blocks whose parent was
    never seen); ``requests`` successful requests checked and ``accounted`` those whose cached
    tokens equal the resident prefix the events give at their scheduling point, per pass in
    ``by_pass`` (``{pass: [accounted, requests]}``); ``file``: the events as JSON lines (None
    without ``--out``); ``survival``: the engine's real reuse gaps and block residency
    (seconds, engine clock) in ``simulate --survival``'s format."""

    endpoint: str
    batches: int
    events: int
    stored: int
    removed: int
    cleared: int
    missing_batches: int
    unmapped_blocks: int
    requests: int
    accounted: int
    by_pass: dict[str, list[int]]
    file: str | None
    survival: Survival


@dataclass(frozen=True, slots=True)
class ServerReport:
    """The summary of one replay through a server (``prefixcache replay --server URL --json``).

    ``engine``: what was detected; ``send``: ``tokens`` or ``chat``; ``load``: the load
    shape; ``block_size`` / ``capacity_blocks``: the prediction's cache (from the engine's
    configuration unless given); ``requests``: original prompts; ``run``: the settings
    digest every row carries. ``passes``: one summary per pass asked for; ``differences``:
    every request whose cached tokens differ from the prediction, with the explaining
    engine fact; ``findings``: PC504 prompt-count mismatches (``--send chat``); ``stopped``:
    why the run stopped early (the server went away), else None; ``interrupted``: Ctrl-C.
    ``kv_events``: what the engine's KV events said (``--kv-events``; None without)."""

    engine: EngineInfo
    send: str
    load: str
    block_size: int
    capacity_blocks: int | None
    requests: int
    run: str
    passes: tuple[ServerPassSummary, ...]
    differences: tuple[Difference, ...]
    findings: tuple[PromptMismatch, ...]
    stopped: str | None
    interrupted: bool
    kv_events: KVEventsReport | None = None


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    """A finished (or stopped / interrupted) run of either stack: the ``report`` (the
    ``--json`` document: :class:`ReplayReport` in-process, :class:`ServerReport` with
    ``--server``), every row (this run's and the resumed file's), ``notes`` on how
    prompts were rendered and on the engine (one line each), the input ``files`` read,
    the ``skipped`` input records, and the results file ``out`` (None when not written)."""

    report: ReplayReport | ServerReport
    rows: tuple[ReplayRow, ...]
    notes: tuple[str, ...]
    files: int
    skipped: tuple[Skipped, ...]
    out: Path | None

    @property
    def disagreements(self) -> tuple[LocalRow, ...]:
        """In-process rows that fail verification, or whose cached tokens differ from the
        simulator's (a server run's differences are its report's ``differences``)."""
        return tuple(r for r in self.rows if isinstance(r, LocalRow) and (
            r.mismatch or (r.predicted_cached is not None and r.predicted_cached != r.cached_tokens)))


class ReplaySession(Protocol):
    """A run ready to go (:func:`prefixcache.replay.open_replay`): ``total`` requests to
    run; ``skipped`` the input records not replayed; ``run(on_request)`` replays them
    (``on_request(pass name)`` after each) and returns the :class:`ReplayOutcome`."""

    total: int
    skipped: tuple[Skipped, ...]

    def run(self, on_request: Callable[[str], None] | None = None) -> ReplayOutcome:
        """Replay every pass; Ctrl-C stops it and the outcome covers what finished."""
        ...
