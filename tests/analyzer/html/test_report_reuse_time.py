"""The report's "Reuse in time" section: its figures and cells are the simulate document's analyses."""

from __future__ import annotations

import html
import re

from tests.analyzer.html.test_report_html import island, report
from tests.helpers import CASES, existing


def test_reuse_time_section_carries_the_documents_numbers(tmp_path) -> None:
    # an engine cache: the report runs --survival there (the case's gpt model alone picks openai, no survival)
    page = report(tmp_path, str(existing(CASES / "clean_append_only.jsonl")), "--cache", "vllm")
    sim = island(page, "doc-simulate")
    surv = sim["analyses"]["survival"]
    assert 'id="reuse-time"' in page and 'href="#reuse-time"' in page
    gaps = island(page, "data-fig-reuse-gaps")["data"]
    assert [d["name"] for d in gaps] == [g["kind"] for g in surv["gaps"]]
    assert gaps[0]["y"] == [p["fraction"] for p in surv["gaps"][0]["within"]]
    curves = island(page, "data-fig-survival")["data"]
    assert len(curves) == len([r for r in surv["residency"] if r["kind"] == "all"]) == len(sim["results"]) // 2
    cells = {k: html.unescape(v) for k, v in re.findall(r'data-key="(sim\.analyses[^"]+)">([^<]*)<', page)}
    assert cells["sim.analyses.survival.gaps.0.gaps_s.count"] == f"{surv['gaps'][0]['gaps_s']['count']:,}"


def test_saved_document_shows_its_ttl_whatif_and_chunks(tmp_path) -> None:
    from typer.testing import CliRunner

    from prefixcache.cli.app import app

    log = str(existing(CASES / "clean_append_only.jsonl"))
    res = CliRunner().invoke(app, ["simulate", log, "--cache", "openai", "--survival", "--ttl-whatif", "--reuse",
                                   "prefix,chunks", "--json"])
    assert res.exit_code == 0, res.output
    saved = tmp_path / "sim.json"
    saved.write_text(res.stdout)
    page = report(tmp_path, log, "--simulate", str(saved))
    sim = island(page, "doc-simulate")
    assert 'id="ttl-whatif-table"' in page and 'id="chunk-ceiling"' in page
    rows = sim["analyses"]["ttl_whatif"]["rows"]
    cells = {k: html.unescape(v) for k, v in re.findall(r'data-key="(sim\.analyses[^"]+)">([^<]*)<', page)}
    for i, r in enumerate(rows):
        assert cells[f"sim.analyses.ttl_whatif.rows.{i}.cached_tokens"] == f"{r['cached_tokens']:,}"
    assert html.escape(sim["analyses"]["ttl_whatif"]["advice"][0]["advice"], quote=False) in page
    assert cells["sim.analyses.chunks.chunk_ceiling_tokens"] == f"{sim['analyses']['chunks']['chunk_ceiling_tokens']:,}"
