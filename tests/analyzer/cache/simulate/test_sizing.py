"""``simulate --sizing``: the smallest self-hosted LRU cache reaching a share of the ideal.

Checked against the simulator itself on real samples (the swe-agent trajectory, an engine log,
and the DeepSeek mini-swe-agent log, a provider's): a plain ``simulate --cache vllm --capacity
Nblocks`` at the capacity the sizing names serves exactly its hit tokens, at least the target
share of the ideal, and one block less serves less than the target.
"""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.cli.app import app
from tests.helpers import SAMPLES, existing

runner = CliRunner()
SWE = SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
DEEPSEEK = SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"


def _simulate(*args: str) -> dict:
    res = runner.invoke(app, ["simulate", "--json", *args])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


@pytest.mark.parametrize("log,cache,target", [(SWE, "vllm", 0.9), (SWE, "vllm", 0.5), (DEEPSEEK, "deepseek", 0.9)])
def test_sizing_is_the_smallest_lru_cache_reaching_the_target(log, cache, target) -> None:
    path = str(existing(log))
    z = _simulate(path, "--cache", cache, "--sizing", str(target), "--kv-model", "llama-3-8b")["analyses"]["sizing"]
    assert (z["cache"], z["policy"], z["block_size"], z["target"]) == ("vllm", "lru", 16, target)
    blocks = z["capacity_blocks"]
    assert z["capacity_tokens"] == 16 * blocks and z["capacity_bytes"] == 16 * blocks * 131072
    rows = _simulate(path, "--cache", "vllm", "--capacity", f"{blocks}blocks,{blocks - 1}blocks,100%")["results"]
    assert rows[0]["cached_tokens"] == z["hit_tokens"] >= target * z["ideal_tokens"]
    assert rows[1]["cached_tokens"] < target * z["ideal_tokens"]
    assert rows[2]["cached_tokens"] == z["ideal_tokens"]  # a cache holding every distinct block is the ideal
    assert z["fraction_of_ideal"] == round(z["hit_tokens"] / z["ideal_tokens"], 6)


def test_sizing_without_kv_model_is_in_tokens_and_a_bad_target_is_one_error() -> None:
    path = str(existing(SWE))
    doc = _simulate(path, "--sizing", "0.9")
    z = doc["analyses"]["sizing"]
    assert z["capacity_bytes"] is None and z["kv_bytes_per_token"] is None and z["capacity_tokens"] > 0
    assert _simulate(path)["results"] and "analyses" not in _simulate(path)  # not asked: the document is unchanged
    res = runner.invoke(app, ["simulate", path, "--sizing", "1.5"])
    assert res.exit_code == 2 and "--sizing must be a fraction" in res.output
    res = runner.invoke(app, ["simulate", path, "--sizing", "0.9"])
    assert res.exit_code == 0 and "reaches 90% of the ideal on a self-hosted vllm LRU cache" in res.output
