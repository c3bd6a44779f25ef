"""Capacities too small for one request are warned about (fresh-user trial: ``--cache sglang --capacity
1,10,100,1000`` gave 0% with no word why): ``warnings[]`` in the JSON, a ``warning:`` line in the text."""

from __future__ import annotations

from tests.helpers import SAMPLES, existing
from tests.test_doc_figures import run, run_json

SWE = str(existing(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"))
KVT = str(existing(SAMPLES / "kvcache_tester_claudecode_hashids64_trace_0001.json"))


def test_sglang_pool_smaller_than_every_prompt_holds_nothing_and_says_so():
    doc = run_json(["simulate", SWE, "--cache", "sglang", "--capacity", "1,10,100,1000"])
    assert [r["hit_ratio_tokens"] for r in doc["results"]] == [0.0] * 4
    w = doc["warnings"]
    assert len(w) == 4 and all("every prompt is longer (smallest 1,252, median 4,685 tokens)" in x for x in w)
    assert all("holds nothing between requests" in x for x in w)
    assert w[0].startswith("--capacity 1: 1 token; ") and w[3].startswith("--capacity 1000: 1,000 tokens; ")
    code, out, _ = run(["simulate", SWE, "--cache", "sglang", "--capacity", "1,10,100,1000"], columns=400)
    assert code == 0 and out.count("warning: --capacity") == 4
    assert "warning: --capacity 1: 1 token; every prompt is longer" in out


def test_sglang_partial_and_roomy_pools():
    doc = run_json(["simulate", SWE, "--cache", "sglang", "--capacity", "5000,10000"])
    assert doc["results"][0]["hit_ratio_tokens"] > 0.5
    assert len(doc["warnings"]) == 1
    assert doc["warnings"][0].startswith("--capacity 5000: 5,000 tokens; 3 of 13 prompts are longer (median 4,685, "
                                         "largest 5,077 tokens): SGLang evicts whole leaves")
    assert run_json(["simulate", SWE, "--cache", "sglang"])["warnings"] == []


def test_vllm_pool_smaller_than_a_request():
    doc = run_json(["simulate", SWE, "--cache", "vllm", "--capacity", "1,10,100,1000"])
    w = doc["warnings"]
    assert [x.split(":")[0] for x in w] == ["--capacity 1", "--capacity 10", "--capacity 100"]
    assert w[0].startswith("--capacity 1: 1 block of 16 tokens; 13 of 13 requests are larger (median 293, largest 318 blocks)")
    assert "11 of 13 requests are larger" in w[2] and "cannot schedule a request larger than its pool" in w[2]


def test_block_trace_counts_hash_ids_once_per_capacity():
    doc = run_json(["simulate", KVT, "--cache", "blocks", "--capacity", "100,5000",
                    "--policy", "lru,fifo"])
    assert len(doc["results"]) == 4
    assert doc["warnings"] == ["--capacity 100: 100 blocks of 64 tokens; 41 of 41 requests are larger (median 1,968, "
                               "largest 3,075 blocks): an engine cannot schedule a request larger than its pool; the model "
                               "runs it anyway and keeps only the blocks that fit, so these rows are not an engine's "
                               "figures"]


def test_provider_caches_have_no_capacity_warnings():
    warnings = run_json(["simulate", SWE, "--cache", "anthropic"])["warnings"]
    assert not [w for w in warnings if w.startswith("--capacity")]
    # the one line left says how breakpoints an agent log cannot show are taken (issue 23)
    assert warnings == ["breakpoints not in the log for 13 of 13 request(s) (set by the agent, which logs no request "
                        "body): assumed at the end of the system prompt and tools and at the end of the prompt, "
                        "Claude Code's placement"]


def test_cache_models_page_shows_the_warnings():
    """docs/methods/cache-models.md, SGLang radix: the real warning lines (COLUMNS=120)."""
    from tests.test_doc_figures import assert_shows, documented

    for extra in (["--cache", "sglang", "--capacity", "1,10,100,1000"], ["--cache", "vllm", "--capacity", "10"]):
        argv = ["simulate", "tests/fixtures/samples/" + SWE.rsplit("/", 1)[-1], *extra]
        code, out, _ = run(argv, columns=120)
        assert code == 0
        assert_shows(out, documented("docs/methods/cache-models.md", "$ prefixcache " + " ".join(argv)))


def test_fleet_replicas_too_small_for_one_prompt_say_so():
    args = ["simulate", SWE, "--cache", "sglang", "--replicas", "2", "--router", "round-robin,session"]
    doc = run_json([*args, "--capacity", "1000"])
    assert [r["hit_ratio_tokens"] for r in doc["results"]] == [0.0, 0.0]
    assert doc["warnings"] == [
        "--capacity 1000 per replica: 1,000 tokens; every prompt is longer (smallest 1,252, median 4,685 tokens): "
        "SGLang evicts whole leaves and a prompt inserted into an empty tree is one leaf, so this cache holds "
        "nothing between requests and hits 0%"]
    code, out, _ = run([*args, "--capacity", "1000"], columns=400)
    assert code == 0 and out.count("warning: --capacity 1000 per replica") == 1
    assert run_json([*args, "--capacity", "10000"])["warnings"] == []
    assert run_json([*args])["warnings"] == []
