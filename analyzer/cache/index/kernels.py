"""The compiled core of the cache passes, and the switch to its pure-Python twins.

Hot loops of ``simulate`` run over columnar int64 arrays (request offsets, block ids, positions) in C
(``_kernels.c``, built by setuptools at install time, optional: an install without a compiler keeps only
the Python twins). Every compiled function has a pure twin that gives identical results; tests run both
on every shared trace. ``PREFIXCACHE_PURE=1`` in the environment selects the twins (read at each call).

Why a plain C extension (docs/architecture.md, "Compiled core"): it builds with what setuptools, gcc and
Python's headers give, with no build dependency to fetch (no Cython, no numpy headers: arrays come in
through the buffer protocol), no JIT warm-up on every run (numba compiles at first call, costing start-up)
and no runtime dependency.
"""

from __future__ import annotations

import os

import numpy as np

try:  # the optional extension (setup.py); absent when the install had no compiler
    from prefixcache.analyzer.cache.index import _kernels
except ImportError:  # pragma: no cover - depends on the install
    _kernels = None

__all__ = ["compiled", "dominance_le", "native"]


def compiled() -> bool:
    """True when the compiled core is built and ``PREFIXCACHE_PURE`` is not set to a true value."""
    return _kernels is not None and os.environ.get("PREFIXCACHE_PURE", "").strip().lower() in ("", "0", "false", "no")


def native():
    """The compiled module when :func:`compiled`, else None (callers then run their pure twin)."""
    return _kernels if compiled() else None


def i64(a) -> np.ndarray:
    """``a`` as a C-contiguous int64 array (no copy when it already is one)."""
    return np.ascontiguousarray(a, dtype=np.int64)


def dominance_le(prev1: np.ndarray, L: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """``out[i] = #{t < L[i] : prev1[t] ≤ q1[i]}`` for every query (int64 arrays; ``prev1`` ≥ 0).

    The 2-D dominance count behind LRU stack distances (:mod:`..simulate.stack_profile`). Compiled: one
    Fenwick-tree sweep over ``t`` with the queries bucketed by ``L``, O((n + m) log n). Pure: a merge-sort
    tree in numpy, O(n log² n). Identical results."""
    lib = native()
    if lib is None:
        return _dominance_le_numpy(prev1, L, q1)
    out = np.zeros(len(L), dtype=np.int64)
    if len(L):
        lib.dominance_le(i64(prev1), i64(L), i64(q1), out)
    return out


def _dominance_le_numpy(prev1: np.ndarray, L: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """The pure twin of :func:`dominance_le` (merge-sort tree).

    Level ℓ holds ``prev1`` sorted inside aligned segments of 2^ℓ positions, keyed
    ``segment·K + value``; it is built from level ℓ−1 by a stable (run-merging)
    sort, so each level costs about one linear pass.
    """
    n = len(prev1)
    out = np.zeros(len(L), dtype=np.int64)
    if n == 0 or len(L) == 0:
        return out
    K = np.int64(n + 2)
    keys = np.arange(n, dtype=np.int64) * K + prev1  # level 0: one position per segment
    for lvl in range(int(n).bit_length()):
        if lvl:
            keys = np.sort((keys // K >> 1) * K + keys % K, kind="stable")
        sel = np.flatnonzero((L >> lvl) & 1)
        if not len(sel):
            continue
        seg = (L[sel] >> lvl) - 1
        pos = np.searchsorted(keys, seg * K + q1[sel], side="right")
        out[sel] += pos - (seg << lvl)
    return out
