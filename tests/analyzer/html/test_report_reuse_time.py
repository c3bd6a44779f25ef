"""The report's "Reuse in time" section: its figures and cells are the simulate document's analyses."""

from __future__ import annotations

import html
import re

from tests.analyzer.html.test_report_html import island, report
from tests.helpers import CASES, existing


def test_reuse_time_section_carries_the_documents_numbers(tmp_path) -> None:
    page = report(tmp_path, str(existing(CASES / "clean_append_only.jsonl")))
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
