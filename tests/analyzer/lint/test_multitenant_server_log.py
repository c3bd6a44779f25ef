"""A real multi-tenant vLLM server log (tests/fixtures/formats/README.md: three tenants, two
conversations each, made with make_vllm_multitenant.py against a real vLLM server) and the
client's own log of the same run: no drift across tenants or conversations, per-tenant figures,
and the server's prompts are the billed prompts."""

from __future__ import annotations

from prefixcache.analyzer.cache.simulate.study import SimulateOptions
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.lint.simulated import simulate
from prefixcache.analyzer.prepare import prepare
from prefixcache.analyzer.prepare.size_check import SizeCheck
from tests.helpers import FIXTURES

SERVER = str(FIXTURES / "formats" / "vllm_multitenant_server.log.gz")
CLIENT = str(FIXTURES / "formats" / "vllm_multitenant_client.jsonl")


def test_server_log_names_tenants_and_chains_conversations() -> None:
    ingest = Ingest([SERVER])
    reqs = list(ingest)
    assert ingest.summary.records == 1362 and len(reqs) == 24  # every line accounted: 24 requests, the rest notes
    assert [r.extra["user"] for r in reqs[:6]] == ["acme", "acme", "globex", "globex", "initech", "initech"]
    assert all(r.trace is not None and r.messages for r in reqs)  # token ids from 'details', messages from the body
    run = lint_paths([SERVER], LintConfig())
    assert len(run.sessions) == 6  # 3 tenants x 2 conversations
    drift = [(r.session, r.lost_code) for r in run.results if r.lost_code]
    tenant_of = {r.session: r.extra["user"] for r in reqs}
    assert {tenant_of[s] for s, _ in drift} == {"initech"} and len(drift) == 6  # only the clock in its system prompt
    figures = {g.name: g for g in run.tenants}
    assert {k: g.requests for k, g in figures.items()} == {"acme": 8, "globex": 8, "initech": 8}
    assert figures["initech"].reusable_fraction < 0.15 < 0.55 < figures["acme"].reusable_fraction
    assert sum(b.requests for b in run.divergence) == 6


def test_client_log_prompts_are_the_servers_and_tenants_match_its_cache() -> None:
    server = {tuple(m.content for m in r.messages): r.trace.input_length for r in Ingest([SERVER])}
    client = list(Ingest([CLIENT]))
    # the engine's prompt (token ids it logged) is the prompt it billed, call by call
    assert [server[tuple(m.content for m in r.messages)] for r in client] == [r.usage.prompt_tokens for r in client]
    check = SizeCheck().add_all(prepare(client))
    assert check.calls == 24 and all(row.delta == 0 for s in check.sessions.values() for row in s.rows)
    assert len(check.sessions) == 6
    rep = simulate([CLIENT], SimulateOptions(cache="vllm", block_size=32))
    rows = {t.tenant: t for t in rep.tenants}
    assert rows["initech"].cached_tokens == rows["initech"].reported_cached_tokens == 0
    # vLLM also caches the blocks of the replies it generated: it reports more than the prompt-only model
    assert rows["acme"].reported_cached_tokens == 704 and rows["acme"].cached_tokens == 544


def test_the_vllm_gap_is_exactly_the_blocks_of_generated_tokens() -> None:
    """What ``--cache vllm`` does not model, measured on the real server's run (docs/methods/cache-models.md,
    "Generated tokens"): vLLM caches the full blocks of what a request generated, and a later turn that repeats
    the reply hits them. On every one of the 24 calls the engine's cached count is the prompt-only prediction
    or, when the prompt extends the session's previous one, the full blocks of that prompt plus the previous
    call's completion_tokens − 1 (the stop token is sampled, never computed), whichever is larger, under the
    n − 1 cap. The model misses one 32-token block on 10 calls."""
    from prefixcache.analyzer.cache.workload import to_sim_requests

    block = 32
    calls = {c.record: c for c in simulate([CLIENT], SimulateOptions(cache="vllm", block_size=block)).calls}
    prev: dict[str, tuple[int, list[int], int]] = {}
    short = 0
    for r in to_sim_requests(list(prepare(list(Ingest([CLIENT]))))):
        c = calls[r.record]
        generated_end = 0
        p = prev.get(r.session)
        if p is not None and list(r.tokens[:p[0]]) == p[1]:
            generated_end = (p[0] + p[2] - 1) // block * block
        cap = (r.num_tokens - 1) // block * block
        assert c.reported_cached_tokens == min(cap, max(c.predicted_cached_tokens, generated_end)), r.record
        short += c.reported_cached_tokens - c.predicted_cached_tokens == block
        prev[r.session] = (r.num_tokens, list(r.tokens), r.reported_output)
    assert short == 10 and all(c.predicted_cached_tokens <= c.reported_cached_tokens for c in calls.values())
