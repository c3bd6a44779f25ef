"""Issue 28: reports of big inputs stay small and open in a browser (``make test-scale``, marker ``scale``).

The inputs are generated at test time from real samples in tests/fixtures: a 50 MB
Mooncake-shaped trace (the synthetic trace repeated, timestamps shifted, a third of the
copies sharing block hashes) and a 20 MB agent log (a real Claude Code session repeated,
its UUIDs and API ids varied so each copy is a session of its own; see :data:`AGENT_LOG_BYTES`). Each report must be at most 5 MB,
say what it aggregated, and show in headless Chromium the run's request count and the
distribution of prompt tokens on its first screen. A few minutes on 2 cores: not part of
``make test``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.analyzer.html import test_report_html_browser as browser_test
from tests.helpers import ROOT, SAMPLES, existing

pytestmark = [pytest.mark.scale, pytest.mark.slow]

MAX_PAGE_BYTES = 5 * 1000 * 1000
#: The agent log's size. Issue 28 asks for 200 MB; this sample's copies are dense (~5 M prompt tokens a
#: MB), and simulating 200 MB of them takes ~30 min and ~20 GB here, so the test runs 20 MB (3 min, 2 GB).
AGENT_LOG_BYTES = 20 * 1000 * 1000
browser = browser_test.browser  # the headless Chromium fixture of the report browser test
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
API_ID = re.compile(r"\b(?:req|msg|toolu)_[0-9A-Za-z]+")


def mooncake_trace(path: Path, size: int) -> int:
    """A Mooncake-shaped trace of about ``size`` bytes at ``path``; returns its request count."""
    rows = [json.loads(line) for line in existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl").open()]
    span = max(r["timestamp"] for r in rows) + 1
    n = written = 0
    with path.open("w") as out:
        k = 0
        while written < size:
            for r in rows:
                line = json.dumps({**r, "timestamp": r["timestamp"] + k * span,
                                   "hash_ids": [h + (k % 3) * 10**7 for h in r["hash_ids"]]}) + "\n"
                out.write(line)
                written += len(line)
                n += 1
            k += 1
    return n


def agent_log(path: Path, size: int) -> int:
    """A Claude Code log of about ``size`` bytes: the sample session repeated with its UUIDs and API ids
    (``requestId``, message and tool-use ids) varied, so each copy is a session of its own; returns the copies."""
    text = existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl").read_text()
    copies = 0
    with path.open("w") as out:
        while copies * len(text) < size:
            part = UUID.sub(lambda m: m.group(0)[:-6] + f"{copies:06x}", text)
            out.write(API_ID.sub(lambda m: f"{m.group(0)}x{copies}", part))
            copies += 1
    return copies


def _report(log: Path, out: Path) -> str:
    res = subprocess.run([sys.executable, "-m", "prefixcache", "report", str(log), "-o", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    return res.stderr


def _first_screen(browser, page_path: Path) -> dict:
    page, errors, remote = browser_test.load(browser, page_path)
    try:
        assert not errors and not remote, (errors, remote)
        return page.evaluate("""() => {
          const note = document.getElementById('bounded-note');
          const cell = document.querySelector('[data-key="summary.requests"]');
          const r = note.getBoundingClientRect();
          return {note: note.innerText, requests: cell.innerText, noteTop: r.top,
                  p50: note.querySelector('[data-key="report_bounded.prompt_tokens.p50"]').innerText,
                  doc: JSON.parse(document.getElementById('doc-lint').textContent).report_bounded};
        }""")
    finally:
        page.close()


@pytest.mark.parametrize("kind", ["trace", "agent"])
def test_big_inputs_give_small_reports_that_say_what_they_left_out(tmp_path, browser, kind) -> None:
    log = tmp_path / ("trace.jsonl" if kind == "trace" else "agent.jsonl")
    if kind == "trace":
        requests = mooncake_trace(log, 50 * 1000 * 1000)
    else:
        requests = None
        agent_log(log, AGENT_LOG_BYTES)
    out = tmp_path / "report.html"
    _report(log, out)
    assert out.stat().st_size <= MAX_PAGE_BYTES, out.stat().st_size
    seen = _first_screen(browser, out)
    bounded = seen["doc"]
    assert bounded["requests"]["total"] > bounded["requests"]["shown"]
    if requests is not None:
        assert bounded["requests"]["total"] == requests
    assert seen["requests"].replace(",", "") == str(bounded["requests"]["total"])  # the summary is over all requests
    assert f"{bounded['requests']['total']:,} requests" in seen["note"]
    assert seen["p50"] == f"{round(bounded['prompt_tokens']['p50']):,}"
    assert seen["noteTop"] < 900  # on the first screen
