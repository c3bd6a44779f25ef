"""``prefixcache report`` in a real browser: Debian's Chromium, headless, offline.

Each report is loaded from a ``file://`` URL with every other request refused (any
attempt fails the test), must log no console error, must render every embedded figure
(plotly's SVG with traces), and its screenshot must not be blank. A break marker, clicked
with the mouse, selects its findings and shows the diff excerpt; a fleet document's
section renders both its charts. Runs under ``make test`` whenever
``/usr/bin/chromium`` exists (``.ci/run`` installs it); without it the test is skipped,
which ``PREFIXCACHE_STRICT_SKIPS=1`` turns into a failure.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prefixcache.cli.app import app
from tests.helpers import CASES, EXAMPLES, FIXTURES, SAMPLES, existing

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # headless Chromium: a long integration path

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

REPORTS = {
    "case": [str(CASES / "timestamp_in_system.jsonl"), "--cache", "vllm"],  # capacity curves too
    "claude_code": [str(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl")],
    "swe_agent": [str(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj")],
    "replay": [str(EXAMPLES / "agent_session.jsonl"), "--template", "chatml_tools",
               "--replay", str(FIXTURES / "replay" / "agent_session_chatml_tools.jsonl")],
}

#: Share of non-white pixels and distinct colours in a screenshot (run in the page, no image library).
PIXELS = """async (png) => {
  const img = new Image(); img.src = 'data:image/png;base64,' + png; await img.decode();
  const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data, colours = new Set(); let ink = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240) ink++;
    if (i % 64 === 0) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
  }
  return [ink / (d.length / 4), colours.size];
}"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM), args=FLAGS,
            headless=True, viewport={"width": 1200, "height": 900})
        yield context
        context.close()


def load(browser, page_path: Path):
    """Open ``page_path`` offline; returns the page and the console errors and refused requests."""
    page, errors, remote = browser.new_page(), [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def route(r):
        if r.request.url.startswith(("file:", "data:", "blob:")):
            r.continue_()
        else:
            remote.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(page_path.as_uri())
    page.wait_for_function("document.body.dataset.rendered !== 'false'", timeout=90_000)
    return page, errors, remote


@pytest.mark.parametrize("name", list(REPORTS))
def test_report_renders_offline_without_errors(browser, tmp_path, name) -> None:
    out = tmp_path / f"{name}.html"
    for p in REPORTS[name]:
        if p.startswith("/"):
            existing(Path(p))
    res = CliRunner().invoke(app, ["report", *REPORTS[name], "-o", str(out)])
    assert res.exit_code == 0, res.output
    page, errors, remote = load(browser, out)
    assert page.evaluate("document.body.dataset.rendered") == "true"
    assert not errors and not remote, (errors, remote)
    figures = page.locator("[data-figure]")
    assert figures.count() >= 3
    for i in range(figures.count()):
        fig = figures.nth(i)
        assert fig.locator(".main-svg").count() >= 1, fig.get_attribute("id")
        assert fig.locator(".trace").count() >= 1, fig.get_attribute("id")
    ink, colours = page.evaluate(PIXELS, base64.b64encode(page.screenshot(full_page=True)).decode())
    assert ink > 0.05 and colours > 20, (ink, colours)
    page.close()


def test_clicking_a_break_marker_shows_its_findings(browser, tmp_path) -> None:
    out = tmp_path / "case.html"
    assert CliRunner().invoke(app, ["report", *REPORTS["case"], "-o", str(out)]).exit_code == 0
    page, errors, _ = load(browser, out)
    assert page.locator(".finding.selected").count() == 0
    point = page.locator("#fig-session-0 .scatterlayer .point").nth(2)
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_selector(".finding.selected", timeout=10_000)
    selected = page.locator(".finding.selected")
    assert selected.count() >= 1
    assert "session timestamp_in_system#1 request 2" in selected.first.inner_text()
    excerpt = selected.locator(".diff-excerpt")
    assert excerpt.count() == 1 and excerpt.is_visible()  # the diff library's excerpt, shown on click
    text = excerpt.inner_text()
    assert "diff against session timestamp_in_system#1 request 1: first divergent token" in text
    assert "this id" in text and "earlier text" in text and "messages[0].content" in text
    assert page.locator(".finding:not(.selected) .diff-excerpt").first.is_visible() is False
    assert not errors


def test_fleet_section_renders(browser, tmp_path) -> None:
    log = str(existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"))
    res = CliRunner().invoke(app, ["simulate", log, "--replicas", "4", "--router",
                                   "round-robin,session,cache-aware,oracle", "--json"])
    assert res.exit_code == 0, res.output
    (tmp_path / "fleet.json").write_text(res.stdout)
    out = tmp_path / "fleet.html"
    assert CliRunner().invoke(app, ["report", log, "--simulate", str(tmp_path / "fleet.json"),
                                    "-o", str(out)]).exit_code == 0
    page, errors, remote = load(browser, out)
    assert page.evaluate("document.body.dataset.rendered") == "true" and not errors and not remote
    for fig in ("#fig-fleet", "#fig-fleet-ttft"):
        assert page.locator(f"{fig} .trace").count() >= 3, fig
    page.locator("#fleet").scroll_into_view_if_needed()
    page.locator("#fleet").screenshot(path=str(tmp_path / "fleet.png"))
    page.close()
