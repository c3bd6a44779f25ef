"""Capacity sweeps and helpers over a simulated request stream.

:func:`sweep_block_cache` gives per-request figures at many capacities: one LRU
stack-distance pass (:mod:`.stack_profile`) when the policy allows it, Belady MIN replays
(:mod:`.bounds`), else one replay per capacity (:func:`.simulator.simulate_stream`).
Also: the block chains those passes consume and the distinct-block count behind
``N%`` capacities.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from prefixcache.analyzer.cache.base import hit_cap_tokens
from prefixcache.analyzer.cache.simulate.bounds import belady_hits, min_plan
from prefixcache.analyzer.cache.simulate.figures import (
    Levels, RequestFigures, Totals, array_totals, hits_by_segment, lost_by_cause, split_lost,
)
from prefixcache.analyzer.cache.models import CacheSpec, Hit, lru_stack_order, make_model, pool_blocks
from prefixcache.analyzer.cache.simulate.simulator import Baseline, baseline, request_figures, simulate_stream
from prefixcache.analyzer.cache.simulate.stack_profile import ChainColumns, ChainRequest, stack_profile
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError


def chains(reqs: Sequence[SimRequest], spec: CacheSpec, block_size: int) -> list[ChainRequest]:
    """Block chains for the one-pass sweep and Belady (block caches only), from each
    request's kept chain (:meth:`SimRequest.chain`) cut to the blocks the model stores
    with the uncached blocks it holds while it runs (:func:`~.models.pool_blocks`: a trace's
    partial last block is stored only where the model keeps it), capped at n−1 tokens where the model's hit cap says so
    (:attr:`~.models.Traits.cap_last_token`)."""
    capped = spec.traits.cap_last_token
    out = []
    for r in reqs:
        hashes = r.chain(block_size)
        stored, scratch = pool_blocks(spec.traits, r, hashes, block_size)
        if stored < len(hashes):
            hashes = hashes[:stored]
        n = min(r.num_tokens, len(hashes) * block_size)  # a stored partial block holds its own tokens
        cap = hit_cap_tokens(r.num_tokens, block_size) // block_size if capped else None
        out.append(ChainRequest(hashes, n, block_size, cap, scratch))
    return out


def sweep_block_cache(reqs: Sequence[SimRequest], spec: CacheSpec, capacities: Sequence[int],
                      base: Baseline | None = None,
                      progress: Callable[[int], None] | None = None,
                      drift_causes: Mapping[int, str] | None = None) -> list[list[RequestFigures]]:
    """Per-request figures at each capacity (blocks) for ``vllm`` / ``blocks``.

    LRU without TTL: one stack-distance pass (:mod:`.stack_profile`) serves every capacity;
    ``belady``: the larger of the pinned and unpinned MIN replays (:func:`belady_runs`);
    any other policy: one replay each. ``drift_causes``: request order → rule code.
    """
    block_size = spec.block_size_for(reqs)
    base = base or baseline(reqs)
    sequential = spec.in_flight <= 1
    if lru_stack_order(spec) is not None:
        ideal, per_cap = _lru_levels(reqs, spec, capacities, block_size)
    elif spec.policy == "belady" and sequential:
        return [run.rows for run in belady_runs(reqs, spec, capacities, base, progress, drift_causes)]
    else:
        return [simulate_stream(reqs, spec, c, base, drift_causes) for c in capacities]
    model = make_model(replace(spec, policy="lru"), block_size)  # only its granular level is used
    return [_rows(model, reqs, base, cached.tolist(), ideal.tolist(), drift_causes) for cached in per_cap]


def _lru_levels(reqs: Sequence[SimRequest], spec: CacheSpec, capacities: Sequence[int],
                block_size: int, ch: list[ChainRequest] | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """(ideal, cached at each capacity) per request (tokens) from one LRU stack sweep (``ch``: the
    :func:`chains`, when the caller has them)."""
    prof = stack_profile(ch if ch is not None else chains(reqs, spec, block_size), lru_stack_order(spec))
    ntok = _prompt_tokens(reqs)
    return np.minimum(ntok, prof.per_request(prof.INF)[1]), [np.minimum(ntok, prof.per_request(c)[1])
                                                             for c in capacities]


@dataclass(frozen=True, slots=True)
class BeladyRun:
    """Belady MIN at one capacity: the per-request figures of the larger variant (``bound``:
    ``pinned`` or ``unpinned``, by cached tokens; pinned on a tie) and both variants'
    totals, ``(pinned, unpinned)``: cached tokens and hit blocks."""

    rows: list[RequestFigures]
    bound: str
    cached_tokens: tuple[int, int]
    hit_blocks: tuple[int, int]


def belady_runs(reqs: Sequence[SimRequest], spec: CacheSpec, capacities: Sequence[int],
                base: Baseline | None = None, progress: Callable[[int], None] | None = None,
                drift_causes: Mapping[int, str] | None = None) -> list[BeladyRun]:
    """Belady MIN at each capacity (blocks), pinned and unpinned (:mod:`.bounds`); one
    :func:`~.bounds.min_plan` and one ideal (the replay with room for every block) serve
    every capacity, and figures are built for the larger variant only. ConfigError unless
    the cache is ``vllm`` or ``blocks``."""
    block_size = spec.block_size_for(reqs)
    ideal, levels = _belady_levels(reqs, spec, capacities, block_size, progress)
    model = make_model(replace(spec, policy="lru"), block_size)  # only its granular level is used
    base = base or baseline(reqs)
    return [BeladyRun(_rows(model, reqs, base, cached.tolist(), ideal.tolist(), drift_causes), bound, tok, hits)
            for cached, bound, tok, hits in levels]


def _belady_levels(reqs: Sequence[SimRequest], spec: CacheSpec, capacities: Sequence[int], block_size: int,
                   progress: Callable[[int], None] | None = None, ch: list[ChainRequest] | None = None):
    """(ideal tokens per request, per capacity: (cached tokens per request of the larger variant, its
    name, both variants' cached tokens, both variants' hit blocks)). ConfigError unless a block cache."""
    if not spec.traits.block_chain:
        raise ConfigError("--policy belady works with --cache vllm or blocks")
    ch = ch if ch is not None else chains(reqs, spec, block_size)
    plan = min_plan(ch)
    ntok = _prompt_tokens(reqs)
    ideal = np.minimum(ntok, belady_hits(ch, int(plan.distinct.sum()), False, plan) * block_size)  # no eviction
    out = []
    for c in capacities:
        hits = [belady_hits(ch, c, pinned, plan) for pinned in (True, False)]
        cached = [np.minimum(ntok, h * block_size) for h in hits]
        tok = (int(cached[0].sum()), int(cached[1].sum()))
        pick = 1 if tok[1] > tok[0] else 0
        out.append((cached[pick], ("pinned", "unpinned")[pick], tok, (int(hits[0].sum()), int(hits[1].sum()))))
        if progress:
            progress(1)
    return ideal, out


def swept_totals(reqs: Sequence[SimRequest], spec: CacheSpec, capacities: Sequence[int], base: Baseline,
                 drift_causes: Mapping[int, str] | None = None, rows: bool = False,
                 ch: list[ChainRequest] | None = None):
    """The swept policies (LRU stack sweep, Belady) at each capacity as aggregates: per capacity
    ``(Totals, BeladyRun-like (bound, cached tokens, hit blocks) or None)``, and the per-request rows
    of the first capacity only when ``rows`` (``--per-request``, calls). No object per request
    otherwise: levels and loss causes are int64 arrays (:func:`~.figures.split_lost`). ``ch``: the
    :func:`chains` (the same for every policy of one spec), computed when None."""
    block_size = spec.block_size_for(reqs)
    ideal, per_cap = _swept_levels(reqs, spec, capacities, block_size, ch)
    model = make_model(replace(spec, policy="lru"), block_size)  # only its granular level is used
    a = _request_arrays(reqs, base, model, block_size, drift_causes or {})
    out = [(_array_totals(a, cached, ideal, block_size), bound) for cached, bound in per_cap]
    first = _rows(model, reqs, base, per_cap[0][0].tolist(), ideal.tolist(), drift_causes) if rows and per_cap else None
    return out, first


def _swept_levels(reqs, spec: CacheSpec, capacities: Sequence[int], block_size: int, ch):
    """(ideal tokens per request, per capacity ``(cached tokens per request, Belady's (bound, cached
    tokens, hit blocks) or None)``) of the swept policy of ``spec`` (``reqs``: the requests, or their
    prompt tokens as an int64 array)."""
    if spec.policy == "belady":
        ideal, levels = _belady_levels(reqs, spec, capacities, block_size, ch=ch)
        return ideal, [(lv[0], lv[1:]) for lv in levels]
    ideal, cached = _lru_levels(reqs, spec, capacities, block_size, ch)
    return ideal, [(c, None) for c in cached]


def _prompt_tokens(reqs) -> np.ndarray:
    """Prompt tokens per request (int64): ``reqs`` as they are when already an array (a columnar trace)."""
    if isinstance(reqs, np.ndarray):
        return reqs
    return np.fromiter((r.num_tokens for r in reqs), np.int64, len(reqs))


def trace_swept(ch: ChainColumns, prompt: np.ndarray, spec: CacheSpec, capacities: Sequence[int], lcp: np.ndarray,
                drift_end: np.ndarray, drift_causes: Sequence[str | None], rows: bool = False):
    """:func:`swept_totals` of a columnar block trace under ``--cache blocks`` (every request a block
    trace: its granular level is its ``lcp``, its blocks its ids; no spans): per capacity ``(Totals,
    (bound, cached tokens, hit blocks) or None)``, and, when ``rows``, the first capacity's per-request
    levels as ``(cached, ideal, lost)`` arrays (``lost``: :func:`~.figures.split_lost`'s) — else None.
    ``ch``: the chains (:class:`~.stack_profile.ChainColumns`), ``prompt``, ``lcp``, ``drift_end``
    (int64, tokens) and ``drift_causes`` (rule code or None) per request in arrival order."""
    block_size = int(ch.block_size[0]) if len(ch) else spec.block_size or 0
    ideal, per_cap = _swept_levels(prompt, spec, capacities, block_size, ch)
    a = _Arrays(prompt, lcp, drift_end, lcp, np.ones(len(prompt), dtype=bool), ch.lens, drift_causes, [])
    out = [(_array_totals(a, cached, ideal, block_size), bound) for cached, bound in per_cap]
    first = None
    if rows and per_cap:
        cached = per_cap[0][0]
        first = (cached, ideal, split_lost(prompt, lcp, drift_end, lcp, ideal, cached, cached, np.minimum, np.maximum))
    return out, first


@dataclass(frozen=True, slots=True)
class _Arrays:
    prompt: np.ndarray
    lcp: np.ndarray
    drift_end: np.ndarray
    granular: np.ndarray
    trace: np.ndarray
    blocks_total: np.ndarray
    causes: list
    spans: list


def _request_arrays(reqs, base: Baseline, model, block_size: int, causes: Mapping[int, str]) -> _Arrays:
    i64 = lambda it: np.fromiter(it, np.int64, len(reqs))  # noqa: E731
    return _Arrays(i64(r.num_tokens for r in reqs), i64(base.lcp), i64(base.drift_end),
                   i64(model.granular(r, base.lcp[i]) for i, r in enumerate(reqs)),
                   np.fromiter((r.hashes is not None for r in reqs), bool, len(reqs)),
                   i64(len(r.hashes) if r.hashes is not None else -(-r.num_tokens // block_size) for r in reqs),
                   [causes.get(r.order) for r in reqs], [(i, r.spans) for i, r in enumerate(reqs) if r.spans])


def _array_totals(a: _Arrays, cached: np.ndarray, ideal: np.ndarray, block_size: int) -> Totals:
    """:func:`~.figures.totals` of the rows :func:`_rows` would build, from arrays."""
    lost = split_lost(a.prompt, a.lcp, a.drift_end, a.granular, ideal, cached, cached, np.minimum, np.maximum)
    blocks = lambda t: np.where(a.trace, -(-t // block_size), t // block_size)  # noqa: E731
    segs = (hits_by_segment(spans, int(cached[i])) for i, spans in a.spans)
    return array_totals(a.prompt, cached, ideal, a.blocks_total, blocks(cached), blocks(ideal), lost, a.causes, segs)


def _rows(model, reqs: Sequence[SimRequest], base: Baseline, cached: Sequence[int], ideal: Sequence[int],
          drift_causes: Mapping[int, str] | None) -> list[RequestFigures]:
    causes = drift_causes or {}
    return [_row(model, r, base, i, cached[i], ideal[i], causes.get(r.order)) for i, r in enumerate(reqs)]


def _row(model, r: SimRequest, base: Baseline, i: int, cached: int, ideal: int,
         drift_cause: str | None = None) -> RequestFigures:
    lcp = base.lcp[i]
    lv = Levels(r.num_tokens, lcp, base.drift_end[i], model.granular(r, lcp), ideal, cached, cached)
    return request_figures(r, model.block_size, Hit(cached), ideal, lost_by_cause(lv), drift_cause, lcp)


def _ideal_tokens(reqs: Sequence[SimRequest], toks) -> list[int]:
    return [min(r.num_tokens, int(t)) for r, t in zip(reqs, toks)]


def unique_blocks(reqs: Sequence[SimRequest], block_size: int, base: Baseline | None = None) -> int:
    """Distinct blocks of ``block_size`` tokens over all prompts, no salt (the base of
    ``N%`` capacities; :meth:`~.simulator.Baseline.unique_blocks`)."""
    return (base or baseline(reqs)).unique_blocks(block_size)


def distinct_blocks(reqs: Sequence[SimRequest], spec: CacheSpec, block_size: int, base: Baseline | None = None) -> int:
    """The base of ``N%`` capacities for ``spec``'s model, by :attr:`~.models.Traits.distinct`:
    distinct tokens ÷ ``block_size`` (radix pages) or distinct blocks of the prompts'
    chains (:func:`unique_blocks`)."""
    base = base or baseline(reqs)
    if spec.traits.distinct == "tokens":
        return base.unique_tokens // block_size
    return unique_blocks(reqs, block_size, base)


def simulate_tokens(reqs, spec, capacity, base) -> list[int]:
    """Cached tokens per request (convenience over :func:`simulate`)."""
    return [f.cached_tokens for f in simulate_stream(reqs, replace(spec, policy="lru"), capacity, base)]
