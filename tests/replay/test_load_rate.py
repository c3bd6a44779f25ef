"""--rate draws: rescaled as vllm bench serve rescales them, so a run's arrival rate is the target."""

from __future__ import annotations

import numpy as np
import pytest

from prefixcache.replay.server.load import LoadShape


@pytest.mark.parametrize("burstiness", [1.0, 0.5, 4.0])
@pytest.mark.parametrize("n", [2, 100, 1000])
def test_rate_offsets_span_n_minus_one_over_rate(n, burstiness):
    offs = LoadShape(concurrency=None, rate=4.0, burstiness=burstiness, seed=0).offsets([0.0] * n)
    assert offs[0] == 0.0 and len(offs) == n
    assert offs[-1] == pytest.approx((n - 1) / 4.0, rel=1e-12)  # measured rate (n−1)/span = 4/s exactly
    gaps = np.diff(offs)
    assert (gaps >= 0).all()
    if n == 1000:  # still the drawn shape: exponential gaps have CV 1, gamma(k) gaps 1/√k
        assert np.std(gaps) / np.mean(gaps) == pytest.approx(1 / np.sqrt(burstiness), rel=0.15)


def test_rate_offsets_keep_the_seeded_order_of_gaps():
    a = LoadShape(concurrency=None, rate=2.0, seed=3).offsets([0.0] * 50)
    b = LoadShape(concurrency=None, rate=2.0, seed=3).offsets([0.0] * 50)
    c = LoadShape(concurrency=None, rate=2.0, seed=4).offsets([0.0] * 50)
    assert a == b and a != c
