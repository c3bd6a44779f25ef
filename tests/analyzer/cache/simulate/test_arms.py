"""``simulate``'s arms (:mod:`prefixcache.analyzer.cache.simulate.arms`): which arms a grid has, that the
local executor gives the serial figures, and that a bad ``--executor`` is a usage error (the Ray runs are
in ``tests/test_executor_ray.py``, on a real cluster)."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
from prefixcache.analyzer.cache.simulate.arms import map_arms
from prefixcache.analyzer.errors import ConfigError
from tests.helpers import SAMPLES, cli_app

TRACE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"


def _pair(shared: int, arm: int) -> tuple[int, int]:
    return shared, arm


def test_local_arms_run_in_order_here() -> None:
    assert map_arms(_pair, 7, [3, 1, 2]) == [(7, 3), (7, 1), (7, 2)]
    assert map_arms(_pair, 7, [], "local") == []


def test_the_grid_rows_follow_policies_then_capacities() -> None:
    """fifo and lfu one arm per capacity, lru one sweep: rows in --policy order, each at every capacity,
    and the per-request rows of the first arm (fifo 5%) — as the serial loop gave them before the arms."""
    caps = tuple(parse_capacities("5%,25%"))
    doc = simulate([str(TRACE)], SimulateOptions(cache="vllm", policies=("fifo", "lru", "lfu"), capacities=caps,
                                                 per_request=True))
    assert [(r.policy, r.capacity) for r in doc.results] == [
        ("fifo", "5%"), ("fifo", "25%"), ("lru", "5%"), ("lru", "25%"), ("lfu", "5%"), ("lfu", "25%")]
    first = simulate([str(TRACE)], SimulateOptions(cache="vllm", policies=("fifo",), capacities=caps[:1],
                                                   per_request=True))
    assert orjson.dumps(doc.requests) == orjson.dumps(first.requests)
    assert sum(r.cached_tokens for r in doc.requests) == doc.results[0].cached_tokens > 0


@pytest.mark.parametrize("spec", ["bogus", "local:x"])
def test_a_bad_executor_is_a_usage_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="--executor"):
        SimulateOptions(executor=spec)
    res = CliRunner().invoke(cli_app(), ["simulate", str(TRACE), "--executor", spec])
    assert res.exit_code == 2 and "--executor" in res.stderr


def test_an_arm_error_comes_back_as_itself() -> None:
    """An arm's InputError on a Ray worker is sent back as a value and raised here as the same error: same
    class, one line, same fields (never Ray's wrapper with a worker traceback)."""
    import pickle

    from prefixcache.analyzer.cache.simulate.arms import _Raised
    from prefixcache.analyzer.errors import InputError

    err = InputError("no prompt", "trace.jsonl", 7, "hash_ids")
    back = pickle.loads(pickle.dumps(_Raised(type(err), str(err), dict(vars(err))))).rebuilt()
    assert type(back) is InputError and str(back) == str(err) == "trace.jsonl:7 field hash_ids: no prompt"
    assert (back.source, back.record, back.field) == ("trace.jsonl", 7, "hash_ids")
