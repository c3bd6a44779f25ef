"""llama.cpp's llama-server in the loop, when it is on PATH (``make engine-llamacpp``, ~45 min
to build, so not part of CI): the same shared cases, --send tokens, sequential; the slot
model's prediction must equal the engine's ``cached_tokens``. Not run on this project's CI:
these tests were written against the documented behaviour (real-engines.md), not yet run."""

from __future__ import annotations

import pytest

from prefixcache.replay import ReplayOptions, open_replay
from tests.helpers import CASES

pytestmark = pytest.mark.engines
CASE_FILES = sorted(p.name for p in CASES.glob("*.jsonl"))


@pytest.mark.parametrize("case", CASE_FILES)
def test_cases_send_tokens(llamacpp_url, case):
    opts = ReplayOptions(server=llamacpp_url, tokenizer="smollm2", send="tokens", passes=("cold", "warm"))
    res = open_replay([str(CASES / case)], opts).run()
    r = res.report
    assert r.engine.kind == "llamacpp" and r.stopped is None
    cold = r.passes[0]
    assert cold.refused is None and cold.cached_tokens == 0
    assert r.differences == (), r.differences
