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
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.analyzer.html import test_report_html_browser as browser_test
from tests.helpers import ROOT, SAMPLES, existing

pytestmark = [pytest.mark.scale, pytest.mark.slow]

MAX_PAGE_BYTES = 5 * 1000 * 1000
#: The agent log's size (bytes; ``PREFIXCACHE_SCALE_AGENT_MB`` overrides it). Issue 28 asks for 200 MB;
#: this sample's copies are dense (~5 M prompt tokens a MB: 20 MB is 4,590 requests, 97 M prompt tokens).
#: Since the report prepares its input once and simulate's drift pass no longer holds every prepared
#: prompt, 20 MB takes ~50 s CPU and 1.4 GB (was 2.2 GB); the simulation's own peak still grows with the
#: input, so the default stays 20 MB and ``PREFIXCACHE_SCALE_AGENT_MB=200 make test-scale`` runs the 200 MB one.
AGENT_LOG_BYTES = int(float(os.environ.get("PREFIXCACHE_SCALE_AGENT_MB", "20")) * 1000 * 1000)
browser = browser_test.browser  # the headless Chromium fixture of the report browser test
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
API_ID = re.compile(r"\b(?:req|msg|toolu)_[0-9A-Za-z]+")
STAMP = re.compile(r'("timestamp":\s*")([0-9T:.+-]+(?:Z|[+-]\d\d:\d\d))"')
#: Seconds between the starts of the scale test's agent-log copies (:func:`agent_log`'s ``stagger``).
#: With 0 (every copy at the sample's own times) a 200 MB log is ~1,560 sessions advancing in
#: lockstep, more than the session tokenizer keeps state for (256, least recently used dropped), so
#: from ~45 copies on every prompt is tokenized in full and both ``simulate`` and ``report`` slow
#: down several-fold (measured: lint's pass alone past 250 CPU seconds at 200 MB).
AGENT_STAGGER_S = 75.0


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


def agent_log(path: Path, size: int, stagger: float = 0.0) -> int:
    """A Claude Code log of about ``size`` bytes: the sample session repeated with its UUIDs and API ids
    (``requestId``, message and tool-use ids) varied, so each copy is a session of its own; returns the copies.

    ``stagger``: seconds between the starts of consecutive copies (each copy's ``timestamp`` fields
    shifted by ``copy × stagger``). 0 gives every copy the sample's own times: all copies run at the
    same instants, one arrival order interleaving every session of the log request by request.
    :data:`AGENT_STAGGER_S` (the scale test's) starts a copy every 75 s, so about eight of the
    sample's 10-minute sessions overlap at any time: the times still go back at every copy (lint
    and simulate read the log in sorted order), but the log is not ~1,500 sessions in lockstep."""
    text = existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl").read_text()
    copies = 0
    with path.open("w") as out:
        while copies * len(text) < size:
            part = UUID.sub(lambda m: m.group(0)[:-6] + f"{copies:06x}", text)
            part = API_ID.sub(lambda m: f"{m.group(0)}x{copies}", part)
            if stagger:
                shift = timedelta(seconds=copies * stagger)
                part = STAMP.sub(lambda m: m.group(1) + (datetime.fromisoformat(m.group(2)) + shift).isoformat(
                    timespec="milliseconds").replace("+00:00", "Z") + '"', part)
            out.write(part)
            copies += 1
    return copies


def _report(log: Path, out: Path) -> str:
    """Run ``prefixcache report`` on ``log``; its stderr. Prints the report's CPU seconds (user + system,
    ``os.wait4``) and peak RSS, the figures issue 28 compares with the ``simulate`` run the page names
    (``bench/bench_report.py`` times both; ``pytest -s`` shows them here)."""
    timeout = max(900, 15 * log.stat().st_size // 1_000_000)  # 15 s a MB: 200 MB gets 50 min
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "prefixcache", "report", str(log), "-o", str(out)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=err)
        try:
            _, status, usage = _wait4(proc.pid, timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, 1), stderr[-2000:]
    assert "Traceback" not in stderr
    print(f"\nreport of {log.name} ({log.stat().st_size / 1e6:.1f} MB): {usage.ru_utime + usage.ru_stime:.1f} s CPU, "
          f"peak RSS {usage.ru_maxrss / 1024:,.0f} MB, page {out.stat().st_size / 1e6:.2f} MB")
    return stderr


def _wait4(pid: int, timeout: float):
    """``os.wait4(pid)`` within ``timeout`` seconds (TimeoutError after it)."""
    end = time.monotonic() + timeout
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got:
            return got, status, usage
        if time.monotonic() > end:
            raise TimeoutError(f"report ran past {timeout} s")
        time.sleep(0.5)


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
        agent_log(log, AGENT_LOG_BYTES, AGENT_STAGGER_S)
    out = tmp_path / "report.html"
    _report(log, out)
    check_page(browser, out, requests)


def check_page(browser, out: Path, requests: int | None = None) -> dict:
    """The checks of a big input's page: at most 5 MB, and in Chromium its first screen shows the request
    count of every request (``requests`` when known) and the prompt-token p50 of the bounded note; the
    figures read. Usable on a page built outside the test (a measured run's)."""
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
    return seen
