"""Beyond the prefix (a what-if): prompt tokens in chunks already prefilled earlier at another position.

A prefix cache serves only the longest prefix a prompt shares with an earlier one. Position-
independent caching (CacheBlend, Yao et al. 2024, arXiv 2405.16444; EPIC, Hu et al. 2024,
arXiv 2410.15332) reuses the KV of any chunk computed before, wherever it sat, after
recomputing a fraction of its tokens to restore the cross-attention the chunk missed
(CacheBlend recomputes about 15%). ``simulate --reuse prefix,chunks`` gives the ceiling of
that reuse next to the prefix ceiling.

**Chunking rule.** A prompt is cut at its content-block ends (the ends of the system prompt,
each tool and each message: the segment boundaries of the rendered prompt, so a chunk is one
message or tool definition with the template text in front of it); the text after the last
one (the generation prompt, template text) is no chunk, and a prompt without content blocks is
one chunk. ``window`` (tokens) further cuts every chunk
into windows of that many tokens from its start. A block trace has no text: its chunks are
its blocks (logged hash ids; most traces chain them, so a block seen elsewhere is rare).

**Counting rule.** Per request, the *prefix ceiling* is the longest prefix shared with any
earlier request (tokens, the cache-independent level ``lcp`` of :mod:`.simulator`). The *chunk
ceiling* adds every chunk ending past that prefix whose token ids (exactly) were a chunk of an
earlier request, at any position: its tokens past the prefix. So chunk ceiling ≥ prefix ceiling
on every request. ``effective`` = prefix + (1 − ``recompute_fraction``) × (chunk − prefix):
the tokens still saved once the recomputed fraction is paid. The KV of a chunk is not reusable
as-is at another position; this is an upper bound, not a cache model.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.index.compact import Shared
from prefixcache.analyzer.cache.simulate.figures import SEGMENT_GROUPS
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError

#: CacheBlend's recompute ratio (arXiv 2405.16444 §5: about 15% of the tokens of each reused chunk).
DEFAULT_RECOMPUTE = 0.15


@dataclass(frozen=True, slots=True)
class ChunkReuse:
    """The chunk ceiling of a stream (tokens; module docstring): the chunking used, the
    recompute fraction (0–1), prompt tokens, the prefix and chunk ceilings and their ratios,
    the tokens beyond the prefix (and by segment group of the chunk), the requests with any,
    and ``effective_tokens`` = prefix + (1 − recompute) × beyond, rounded down."""

    chunking: str
    recompute_fraction: float
    requests: int
    prompt_tokens: int
    prefix_ceiling_tokens: int
    chunk_ceiling_tokens: int
    beyond_prefix_tokens: int
    effective_tokens: int
    prefix_ceiling_ratio: float
    chunk_ceiling_ratio: float
    requests_with_beyond: int
    beyond_by_segment: dict[str, int]
    note: str


def chunk_bounds(r: SimRequest, window: int | None = None) -> list[tuple[int, int]]:
    """The chunks ``[start, end)`` of ``r`` (tokens, in order, up to its last content-block end):
    cut at its content-block ends, each cut into ``window``-token
    windows when given; a block trace's blocks."""
    n = r.num_tokens
    if r.hashes is not None:
        bs = r.block_size
        return [(k * bs, min(n, (k + 1) * bs)) for k in range(len(r.hashes)) if k * bs < n]
    ends = [b for b in r.boundaries if 0 < b <= n]
    cuts = sorted(set(ends)) if ends else [n]  # the generation prompt after the last block: no chunk
    out, start = [], 0
    for end in cuts:
        if window:
            out.extend((s, min(end, s + window)) for s in range(start, end, window))
        elif end > start:
            out.append((start, end))
        start = end
    return out


def _group(r: SimRequest, pos: int) -> str:
    ends = [e for _, _, e in r.spans]
    i = bisect_right(ends, pos)
    return r.spans[i][0] if i < len(r.spans) and r.spans[i][1] <= pos else "other"


def _keyed(r: SimRequest, window: int | None) -> list[tuple[int, int, int]]:
    """``(start, end, key)`` of every chunk of ``r``: a block trace's hash id, else a hash of
    the chunk's token ids."""
    bounds = chunk_bounds(r, window)
    if r.hashes is not None:
        return [(s, e, k) for (s, e), k in zip(bounds, r.chain(r.block_size))]
    ids = r.tokens.ids() if isinstance(r.tokens, Shared) else (r.tokens or ())
    return [(s, e, hash((e - s, tuple(ids[s:e])))) for s, e in bounds]


def chunk_ceiling(reqs: Sequence[SimRequest], lcp: Sequence[int],
                  window: int | None = None) -> list[tuple[int, int, dict[str, int]]]:
    """Per request of ``reqs`` (arrival order; ``lcp``: each one's prefix ceiling, tokens):
    ``(chunk ceiling tokens, tokens beyond the prefix, those by segment group)`` under the
    module's rules."""
    seen: set[int] = set()
    out = []
    if reqs and all(r.hashes is not None for r in reqs):
        return _trace_ceiling(reqs, lcp)
    for r, p in zip(reqs, lcp):
        keyed = _keyed(r, window)
        groups: dict[str, int] = {}
        for s, e, k in keyed:
            if e > p and k in seen:
                g = _group(r, max(s, p)) if r.spans else "other"
                groups[g] = groups.get(g, 0) + e - max(s, p)
        seen.update(k for _, _, k in keyed)
        beyond = sum(groups.values())
        out.append((p + beyond, beyond, groups))
    return out


def _trace_ceiling(reqs: Sequence[SimRequest], lcp: Sequence[int]) -> list[tuple[int, int, dict[str, int]]]:
    """:func:`chunk_ceiling` of block traces, vectorized: a block (hash id) counts when its first
    occurrence is in an earlier request and it ends past the request's prefix ceiling."""
    chains = [r.chain(r.block_size) for r in reqs]
    lens = np.fromiter(map(len, chains), dtype=np.int64, count=len(chains))
    if not int(lens.sum()):
        return [(p, 0, {}) for p in lcp]
    ids = np.fromiter((h for c in chains for h in c), dtype=np.uint64, count=int(lens.sum()))
    req = np.repeat(np.arange(len(reqs), dtype=np.int64), lens)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    pos = np.arange(ids.size, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    bs = np.repeat(np.fromiter((r.block_size for r in reqs), dtype=np.int64, count=len(reqs)), lens)
    n = np.repeat(np.fromiter((r.num_tokens for r in reqs), dtype=np.int64, count=len(reqs)), lens)
    p = np.repeat(np.asarray(lcp, dtype=np.int64), lens)
    start, end = pos * bs, np.minimum(n, (pos + 1) * bs)
    gain = np.where((req[first[inverse.ravel()]] < req) & (end > p) & (start < n), end - np.maximum(start, p), 0)
    beyond = np.bincount(req, weights=gain, minlength=len(reqs)).astype(np.int64).tolist()
    return [(q + b, b, {"other": b} if b else {}) for q, b in zip(lcp, beyond)]


def chunk_reuse(reqs: Sequence[SimRequest], lcp: Sequence[int], recompute: float = DEFAULT_RECOMPUTE,
                window: int | None = None) -> ChunkReuse:
    """The :class:`ChunkReuse` of ``reqs`` (arrival order) with prefix ceilings ``lcp``.
    ConfigError for a recompute fraction outside 0–1 or a window below 1 token."""
    if not 0 <= recompute <= 1:
        raise ConfigError(f"--recompute must be between 0 and 1, got {recompute}")
    if window is not None and window < 1:
        raise ConfigError(f"--chunk-tokens must be at least 1, got {window}")
    per = chunk_ceiling(reqs, lcp, window)
    by_seg = {g: 0 for g in SEGMENT_GROUPS}
    for _, _, groups in per:
        for g, n in groups.items():
            by_seg[g] += n
    prompt = sum(r.num_tokens for r in reqs)
    prefix, chunk = sum(lcp), sum(c for c, _, _ in per)
    beyond = chunk - prefix
    traces = bool(reqs) and all(r.hashes is not None for r in reqs)
    how = "blocks (hash ids)" if traces else ("segments" + (f", {window}-token windows" if window else ""))
    return ChunkReuse(how, recompute, len(reqs), prompt, prefix, chunk, beyond,
                      prefix + int(beyond * (1 - recompute)), round(prefix / prompt, 6) if prompt else 0.0,
                      round(chunk / prompt, 6) if prompt else 0.0, sum(b > 0 for _, b, _ in per), by_seg,
                      "what-if: chunk KV computed at another position needs a fraction of its tokens recomputed "
                      "(CacheBlend, EPIC) before it can be reused; an upper bound, not a cache model")
