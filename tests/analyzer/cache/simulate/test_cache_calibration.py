"""The incremental calibration map equals the plain one (numpy.interp over every anchor, rebuilt per call)."""

from __future__ import annotations

import random

import numpy as np

from prefixcache.analyzer.cache.simulate.figures import RequestFigures, _monotone, calibrated_cached


def plain(rows, block_size=1, min_tokens=0):
    anchors: dict[str, list[tuple[int, int]]] = {}
    out = []
    for r in rows:
        pts = anchors.setdefault(r.session, [(0, 0)])
        if not r.reported_prompt_tokens:
            out.append(None)
            continue
        pts.append((r.prompt_tokens, r.reported_prompt_tokens))
        if r.cached_tokens <= 0:
            out.append(0)
            continue
        full = r.lost.get("capacity", 0) + r.lost.get("ttl", 0) == 0
        raw = max(r.cached_tokens, r.shared_tokens) if full else r.cached_tokens
        xs, ys = _monotone(pts)
        mapped = min(int(np.interp(raw, xs, ys)) // block_size * block_size, r.reported_prompt_tokens)
        out.append(mapped if mapped >= min_tokens else 0)
    return out


def test_incremental_calibration_equals_the_plain_map():
    rng = random.Random(5)
    for trial in range(40):
        rows, size = [], {}
        for i in range(120):
            s = rng.choice("abc")
            grow = rng.random() < 0.8
            n = size.get(s, 100) + (rng.randrange(1, 400) if grow else -rng.randrange(0, 300))
            size[s] = n = max(1, n)
            rep = None if rng.random() < 0.1 else max(1, int(n * rng.uniform(0.9, 1.3)))
            cached = rng.randrange(0, n + 1) if rng.random() < 0.8 else 0
            lost = {"capacity": rng.choice([0, 0, 5])}
            rows.append(RequestFigures(order=i, session=s, source="x", record=i, prompt_tokens=n,
                                       cached_tokens=cached, ideal_tokens=cached, blocks_total=1, blocks_hit=0,
                                       shared_tokens=rng.randrange(0, n + 1), lost=lost,
                                       reported_prompt_tokens=rep))
        for bs, mt in ((1, 0), (64, 1024), (128, 0)):
            assert calibrated_cached(rows, bs, mt) == plain(rows, bs, mt), (trial, bs)
