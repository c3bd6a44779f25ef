"""Builds the summary of a replay through a server (``replay --server URL --json``): a :class:`~prefixcache.replay.document.ServerReport`.

Per pass (:class:`~prefixcache.replay.document.ServerPassSummary`): token sums (ours, the
engine's, cached, predicted), how many requests reconcile (engine cached = predicted),
TTFT / TPOT / ITL / end-to-end / queue :class:`~prefixcache.analyzer.stats.Distribution`
(seconds, 6 decimals) and the serving figures (:mod:`prefixcache.analyzer.serving`:
throughputs, goodput, hit ratio per second; warm-up left out), failures by reason, and the engine's ``/metrics``
counters grown during the pass with the hit rate as a ratio of sums. Each request whose
cached tokens differ from the prediction is a :class:`~prefixcache.replay.document.Difference`
naming the engine fact that explains it; each ``--send chat`` prompt-count mismatch a
:class:`~prefixcache.replay.document.PromptMismatch` (PC504).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from prefixcache.analyzer.replay_rows import ServerRow
from prefixcache.analyzer.serving import serving_figures
from prefixcache.analyzer.stats import Distribution
from prefixcache.replay.document import (
    Difference, EngineInfo, KVEventsReport, PromptMismatch, ServerPassSummary, ServerReport,
)
from prefixcache.replay.server.kinds import kind_of
from prefixcache.replay.server.metrics import delta
from prefixcache.replay.server.passes import PassState


def _hist_mean(st: PassState, hist: str | None) -> float | None:
    """The mean of histogram ``hist`` over the pass (Δsum ÷ Δcount, seconds; None without it)."""
    if st.before is None or st.after is None or hist is None:
        return None
    s0, s1 = st.before.total(f"{hist}_sum"), st.after.total(f"{hist}_sum")
    c0, c1 = st.before.total(f"{hist}_count"), st.after.total(f"{hist}_count")
    if None in (s0, s1, c0, c1) or not c1 > c0:
        return None
    return round((s1 - s0) / (c1 - c0), 6)


def _metrics(kind: str, st: PassState, cached: int) -> tuple[dict[str, int], float | None, bool | None, float | None]:
    """The counters grown during the pass, their hit rate (Σ hits / Σ queries), whether the
    hits equal ``cached`` and the engine's own mean TTFT (seconds; None without its histogram)."""
    traits = kind_of(kind)
    grown = delta(kind, st.before, st.after)
    hits = grown.get("prefix_cache_hits", grown.get("prompt_tokens_cached", grown.get("cached_tokens")))
    queries = grown.get("prefix_cache_queries")
    if queries is None and hits is not None and "prompt_tokens" in grown:
        queries = grown["prompt_tokens"] + (hits if traits.prompt_excludes_cached else 0)
    rate = round(hits / queries, 6) if hits is not None and queries else None
    return grown, rate, (None if hits is None else hits == cached), _hist_mean(st, traits.ttft_histogram)


def summarize_pass(info: EngineInfo, st: PassState, rows: Sequence[ServerRow],
                   slo: dict[str, float] | None = None) -> ServerPassSummary:
    """The summary of pass ``st.name`` from its ``rows`` (``slo``: seconds per metric, for goodput).
    Token sums and reconciliation cover every successful request, warm-up included (the
    engine's counters saw them); latencies and throughputs leave the warm-up out."""
    good = [r for r in rows if r.ok]
    measured = [r for r in good if not r.warmup]
    cached = sum(r.cached_tokens or 0 for r in good)
    grown, rate, equal, ttft = _metrics(info.kind, st, cached)
    fig = serving_figures(rows, slo)
    wall = st.wall_s
    prompt = sum(r.prompt_tokens for r in good)
    return ServerPassSummary(
        pass_name=st.name, reset=st.reset, refused=st.refused, requests=len(rows), ok=len(good),
        failed=len(rows) - len(good), prompt_tokens=prompt,
        engine_prompt_tokens=sum(r.engine_prompt_tokens or 0 for r in good), cached_tokens=cached,
        predicted_cached=sum(r.predicted_cached or 0 for r in good),
        reconciled=sum(r.reconciles is True for r in good), differing=sum(r.reconciles is False for r in good),
        unreported=sum(r.cached_tokens is None for r in good),
        hit_rate=round(cached / prompt, 6) if prompt else 0.0,
        ttft=fig.ttft, tpot=fig.tpot, itl=fig.itl, e2e=fig.e2e, queue=Distribution.of(r.queue_s for r in measured),
        wall_s=round(wall, 6), requests_per_s=fig.request_throughput, output_tok_s=fig.output_throughput,
        evicted_blocks=st.evicted_blocks,
        failures=dict(sorted(Counter(_reason(r.reason) for r in rows if not r.ok).items())),
        metrics=grown, metrics_hit_rate=rate, metrics_equal=equal, engine_ttft_mean=ttft,
        engine_queue_mean=_hist_mean(st, kind_of(info.kind).queue_histogram), unsent=st.unsent, serving=fig)


def _reason(reason: str) -> str:
    """A failure reason folded for counting (``HTTP 500: …`` → ``HTTP 500``)."""
    return reason.split(":")[0].split(" (")[0]


def explain(info: EngineInfo, r: ServerRow, st: PassState | None) -> str:
    """The engine fact that explains why ``r``'s cached tokens differ from the prediction."""
    if r.send == "chat" and r.engine_prompt_tokens is not None and r.engine_prompt_tokens != r.prompt_tokens:
        return (f"the engine rendered {r.engine_prompt_tokens} prompt tokens, we {r.prompt_tokens} (PC504): "
                "the prediction is for our tokens")
    if st is not None and st.reset is False:
        return "the cache was not reset before the pass: the engine held blocks of earlier requests"
    reuse = kind_of(info.kind).reuse
    if reuse is not None:
        return reuse
    if r.in_flight > 0:
        return (f"sent with {r.in_flight} request(s) in flight: the engine's scheduler order and chunked prefill "
                "decide which blocks were registered or pinned")
    if st is not None and st.evicted_blocks:
        return (f"the KV capacity ({info.num_blocks} blocks) evicted: the engine's free-queue order decides "
                "which blocks survive")
    return "unexplained"


def differences(info: EngineInfo, rows: Sequence[ServerRow], states: Sequence[PassState],
                facts: dict[tuple[str, int], str] | None = None) -> list[Difference]:
    """Every successful request whose engine cached tokens differ from the prediction. ``facts``:
    the named KV event behind a request's difference (:func:`~prefixcache.replay.server.ledger.reconcile`),
    used where there is one."""
    by_name = {s.name: s for s in states}
    facts = facts or {}
    out = []
    for r in rows:
        if r.ok and r.predicted_cached is not None and r.cached_tokens != r.predicted_cached:
            by = None if r.cached_tokens is None else r.cached_tokens - r.predicted_cached
            fact = ("the engine reported no cached tokens (vLLM: --enable-prompt-tokens-details; SGLang: "
                    "--enable-cache-report)") if r.cached_tokens is None else (
                facts.get((r.pass_name, r.position)) or explain(info, r, by_name.get(r.pass_name)))
            out.append(Difference(r.pass_name, r.position, r.source, r.record, r.cached_tokens, r.predicted_cached,
                                  by, fact))
    return out


def prompt_mismatches(rows: Sequence[ServerRow]) -> list[PromptMismatch]:
    """PC504 findings: chat requests whose engine prompt count differs from ours."""
    return [PromptMismatch("PC504", r.pass_name, r.position, r.source, r.record, r.prompt_tokens,
                           r.engine_prompt_tokens, r.engine_prompt_tokens - r.prompt_tokens)
            for r in rows if r.ok and r.send == "chat" and r.engine_prompt_tokens is not None
            and r.engine_prompt_tokens != r.prompt_tokens]


def build_server_report(info: EngineInfo, *, send: str, load: str, block_size: int, capacity_blocks: int | None,
                        requests: int, run: str, rows: Sequence[ServerRow], states: Sequence[PassState],
                        stopped: str | None, interrupted: bool, slo: dict[str, float] | None = None,
                        kv_events: KVEventsReport | None = None,
                        facts: dict[tuple[str, int], str] | None = None) -> ServerReport:
    """The document of a finished (or stopped / interrupted) server replay (``slo``: seconds
    per metric, for goodput). A request recorded twice (failed, then sent again by
    ``--resume``) counts once, by its latest row. ``kv_events`` and ``facts``: what the
    engine's KV events said (:mod:`~prefixcache.replay.server.ledger`)."""
    rows = list({(r.pass_name, r.position): r for r in rows}.values())
    passes = tuple(summarize_pass(info, st, [r for r in rows if r.pass_name == st.name], slo) for st in states)
    return ServerReport(engine=info, send=send, load=load, block_size=block_size, capacity_blocks=capacity_blocks,
                        requests=requests, run=run, passes=passes,
                        differences=tuple(differences(info, rows, states, facts)),
                        findings=tuple(prompt_mismatches(rows)), stopped=stopped, interrupted=interrupted,
                        kv_events=kv_events)
