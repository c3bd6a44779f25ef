"""Sampled LRU hit-ratio curves for traces too big for an exact pass (SHARDS).

Spatially hashed sampling (Waldspurger et al., "Efficient MRC Construction with SHARDS",
FAST '15, fixed-rate variant): a block id is kept when ``hash(id) mod P < T`` with
``T = round(R·P)``, ``P = 2^24``; every reference to a kept id is kept, so the sample is a
random subset of *ids* with all their reuses, and a stack distance measured among sampled
ids, scaled by ``1/R``, estimates the true one. The one-pass LRU sweep of
:mod:`.stack_profile` then runs on the sample only: its arrays are proportional to the
sampled references (about R of the trace's blocks).

What is estimated: the LRU block and token hit ratios of ``--cache vllm``/``blocks`` at each
capacity, with the prefix rule applied over the sampled blocks of each request (a request's
run stops at its first sampled block that misses). That equals the exact prefix rule when
a block's leading blocks are at least as recent as itself, which holds for chained block
ids under vLLM's tail-first freeing; for head-first (``blocks``) orders it can count a hit
behind an unsampled miss (an upper-side bias, shown by comparing with the exact pass on a
sample of the trace). vLLM's scratch block (one slot while a request runs) is not modelled
(a 1-block shift of the capacity).

The error next to each figure is about two standard deviations (~95%), the sum of:

* **id sampling**: the ratio estimator over independently kept ids, linearised:
  ``Var ≈ (1 − R) Σ_k (h_k − p̂·n_k)² / (Σ_k n_k)²`` over sampled ids ``k`` with ``h_k`` hit
  and ``n_k`` looked-up tokens (blocks);
* **distance scaling**: a distance ``D`` is seen as ``X/R`` with ``X ~ Binomial(D, R)``, so
  around capacity ``C`` it is off by up to ``δ = 2·sqrt(C(1 − R)/R)`` blocks: the curve's own
  change over ``[C − δ, C + δ]`` (larger side).

It is a statistical band, not a hard bound; tests check it covers the exact figure on the
shared traces at most capacities and salts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.index.kernels import dominance_le
from prefixcache.analyzer.cache.simulate.stack_profile import NEVER, ChainRequest, _previous, chain_values
from prefixcache.analyzer.errors import ConfigError

#: The hash space of the sampling test ``hash(id) mod P < R·P``.
MODULUS = 1 << 24


@dataclass(frozen=True, slots=True)
class SampledPoint:
    """One capacity of a sampled curve: estimated hit ratios (0–1) and their ± error (absolute,
    about 2σ)."""

    capacity: str
    capacity_blocks: int
    hit_ratio_blocks: float
    hit_ratio_blocks_error: float
    hit_ratio_tokens: float
    hit_ratio_tokens_error: float


@dataclass(frozen=True, slots=True)
class SampledCurve:
    """A SHARDS LRU curve: the rate ``R`` (0–1), the salt of the id hash, the block lookups of the
    whole trace and of the sample, the distinct sampled ids, and one :class:`SampledPoint` per
    capacity."""

    rate: float
    salt: int
    lookups: int
    sampled_lookups: int
    sampled_ids: int
    points: list[SampledPoint]


def mix64(values: np.ndarray, salt: int = 0) -> np.ndarray:
    """splitmix64's finaliser over uint64 ids (a fixed, well-mixed hash; Steele et al. 2014)."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64) ^ np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
        z = (z + np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def sampled_ids(values: np.ndarray, rate: float, salt: int = 0) -> np.ndarray:
    """Boolean mask of the ids kept at ``rate`` (``hash(id) mod P < round(rate·P)``)."""
    return (mix64(values, salt) % np.uint64(MODULUS)) < np.uint64(round(rate * MODULUS))


def shards_curve(requests: Sequence[ChainRequest], capacities: Sequence[tuple[str, int]], rate: float,
                 free_order: str = "tail-first", salt: int = 0,
                 totals: tuple[int, int] | None = None) -> SampledCurve:
    """The sampled LRU curve of ``requests`` at ``capacities`` (``(label, blocks)``) and ``rate``
    (0 < R ≤ 1; R = 1 is the exact per-sample sweep). ConfigError on a rate outside (0, 1].
    Repeats of an id inside one request count once (its first slot in recency order).
    ``totals``: (prompt tokens, prompt blocks) the ratios are of, when the chains hold fewer
    (a model that stores only full blocks); default: the chains' own tokens and blocks."""
    if not 0 < rate <= 1:
        raise ConfigError(f"--sample must be a rate in (0, 1], got {rate:g}")
    reqs = requests if isinstance(requests, list) else list(requests)
    nreq = len(reqs)
    # the columns of the sampled lookups only (memory about R of the lookups, beyond the ids themselves):
    # each kept block's request, position, tokens, cap and recency slot, as columns() gives them for all
    lens = np.fromiter((len(r.hashes) for r in reqs), np.int64, nreq)
    total = int(lens.sum())
    offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    bsz = np.fromiter((r.block_size for r in reqs), np.int64, nreq)
    ntok = np.fromiter((r.num_tokens for r in reqs), np.int64, nreq)
    maxb = np.fromiter((len(r.hashes) if r.max_blocks is None else r.max_blocks for r in reqs), np.int64, nreq)
    flat = chain_values(reqs, total)
    step = 1 << 20  # hashed a million ids at a time: the hash's temporaries stay small
    keep = np.concatenate([np.flatnonzero(sampled_ids(flat[a:a + step], rate, salt)) + a
                           for a in range(0, total, step)] or [np.zeros(0, dtype=np.int64)]).astype(np.int64)
    k_req = np.searchsorted(offsets, keep, side="right") - 1
    k_idx = keep - offsets[k_req]
    k_flat = flat[keep]
    del flat
    k_tok = np.clip(ntok[k_req] - k_idx * bsz[k_req], 0, bsz[k_req])
    k_capped = k_idx < maxb[k_req]
    k_spos = offsets[k_req] + lens[k_req] - 1 - k_idx if free_order == "tail-first" else keep
    o = np.argsort(k_spos, kind="stable")                  # the sample in recency order
    S, s_req = k_flat[o], k_req[o]
    prev, _ = _previous(S)
    starts = np.searchsorted(s_req, np.arange(nreq), side="left")
    first = ~(prev >= starts[s_req]) if len(S) else np.zeros(0, dtype=bool)  # drop repeats inside a request
    o, S, s_req = o[first], S[first], s_req[first]
    prev, _ = _previous(S)
    starts = np.searchsorted(s_req, np.arange(nreq), side="left")
    warm = prev >= 0
    rank = np.full(len(S), NEVER, dtype=np.int64)
    L = starts[s_req]
    rank[warm] = dominance_le(prev + 1, L[warm], prev[warm] + 1) - prev[warm] - 1
    rank[~k_capped[o]] = NEVER
    p = np.argsort(keep[o], kind="stable")                 # back to prompt order
    loc, r, req = o[p], rank[p], s_req[p]
    m = _run_max(r, req)
    tok = k_tok[loc].astype(np.float64)
    ids = np.unique(S, return_inverse=True)[1][p] if len(S) else np.zeros(0, dtype=np.int64)
    all_tokens = int(np.minimum(np.maximum(ntok, 0), lens * bsz).sum())  # = the sum of every block's tokens
    tokens, blocks = totals or (all_tokens, total)
    share = (total / blocks if blocks else 0.0, float(all_tokens) / tokens if tokens else 0.0)
    points = [_point(label, cap, m, tok, ids, rate, share) for label, cap in capacities]
    return SampledCurve(rate, salt, total, len(S), int(ids.max()) + 1 if len(ids) else 0, points)


def _run_max(rank: np.ndarray, req: np.ndarray) -> np.ndarray:
    """Running maximum of ``rank`` inside each request (prompt order); NEVER stays NEVER."""
    if not len(rank):
        return rank
    cold = rank == NEVER
    big = np.int64(int(rank[~cold].max()) + 2 if (~cold).any() else 2)
    r = np.where(cold, big - 1, rank)
    m = np.maximum.accumulate(req * big + r) - req * big
    return np.where(m >= big - 1, NEVER, m)


def _point(label: str, cap: int, m: np.ndarray, tok: np.ndarray, ids: np.ndarray, rate: float,
           share: tuple[float, float]) -> SampledPoint:
    """One capacity: ratios over the chains' blocks and tokens, times ``share`` (their part of the
    prompt blocks and tokens the exact figures divide by)."""
    scaled = m.astype(np.float64) / rate
    (pb, eb), (pt, et) = (tuple(x * f for x in _estimate(scaled, w, ids, cap, rate))
                          for w, f in zip((np.ones(len(m)), tok), share))
    return SampledPoint(label, cap, round(pb, 6), round(eb, 6), round(pt, 6), round(et, 6))


def _estimate(scaled: np.ndarray, w: np.ndarray, ids: np.ndarray, cap: int, rate: float) -> tuple[float, float]:
    """(ratio, ± error) at ``cap`` blocks for weights ``w`` (see the module docstring)."""
    total = float(w.sum())
    if total <= 0:
        return 0.0, 1.0
    ratio = lambda c: float(w[scaled < c].sum()) / total  # noqa: E731
    p = ratio(cap)
    z = np.bincount(ids, weights=np.where(scaled < cap, w, 0.0) - p * w)
    sd = float(np.sqrt(max(0.0, (1 - rate) * float((z * z).sum())))) / total
    delta = 2 * np.sqrt(cap * (1 - rate) / rate)
    shift = max(abs(ratio(cap + delta) - p), abs(p - ratio(max(0.0, cap - delta))))
    return p, min(1.0, 2 * sd + shift)
