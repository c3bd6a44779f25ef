"""Per input: reusable tokens before → after canonicalize, the rule codes each command names for
each break (lint, diff, report's excerpt, canonicalize), and canonicalize's structure check.

    python bench/one_vocabulary.py [LOG ...]     # default: every tests/fixtures/cases/*.jsonl

One line per input, then one per break: ``request k: lint PCnnn | diff PCnnn | report PCnnn |
canonicalize PCnnn (applied|reported)``. A break whose drift an earlier rewrite of the session
already repaired (the request returns to the first-sent form) shows ``canonicalize -`` with
``(repaired earlier)``; a break whose request the rewrite repaired under another code shows that code
with ``(applied: ANOTHER CODE)``. A break judged against another session's request (PC602) is
named ``SESSION:K vs SESSION':K'``.
"""

from __future__ import annotations

import sys
from io import BytesIO
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def one(path: str) -> list[str]:
    """The lines of one input."""
    from prefixcache.analyzer import api
    from prefixcache.analyzer.canonical.run import canonicalize_paths
    from prefixcache.analyzer.errors import ConfigError
    from prefixcache.analyzer.html.excerpts import break_diffs
    from prefixcache.analyzer.lint.diff import diff_requests
    from prefixcache.analyzer.lint.rules import REGISTRY

    doc = orjson.loads(b"".join(api.lint([path]).json_chunks()))
    run = canonicalize_paths([path])
    buf = BytesIO()
    try:
        n = run.write(buf)
    except ConfigError:  # a format that cannot be written back as itself: as canonicalize --to openai
        buf = BytesIO()
        n = run.write(buf, "openai")
    report = run.report("-", n, buf.getvalue())
    b, a = report.total.before, report.total.after
    checks = [c.structure_ok for c in report.changes]
    lines = [f"{Path(path).name}: reusable {b.reusable_tokens:,}/{b.prompt_tokens:,} ({b.fraction:.1%}) → "
             f"{a.reusable_tokens:,}/{a.prompt_tokens:,} ({a.fraction:.1%}); lint of the written log "
             f"{report.verified.reusable_tokens:,} (agrees: {report.agrees}); structure check "
             f"{'passed' if all(checks) else 'FAILED'} on {len(checks)} change set(s)"]
    excerpts = {(doc["requests"][e["row"]]["session"], doc["requests"][e["row"]]["index"]): e["diff"]["cause_code"]
                for e in break_diffs([path], doc)}
    canon: dict[tuple[str, int], list] = {}  # the codes canonicalize prints (its report's rows)
    for t in report.transformations:
        canon.setdefault((t.session, t.index), []).append(t)
    for f in doc["findings"]:
        if REGISTRY[f["code"]].scope != "pair" or not f.get("shared_with"):
            continue
        key = (f["session"], f["request"])
        cross = f["shared_with"][0] != f["session"]  # judged against another session's request
        against = f"{f['shared_with'][0]}:{f['shared_with'][1]}" if cross else None
        d = diff_requests([path], f"{key[0]}:{key[1]}", against).cause_code
        here = [(t.code, t.applied) for t in canon.get(key, []) if t.code == f["code"]]
        other = sorted({t.code for t in canon.get(key, []) if t.applied})
        earlier = any(t.code == f["code"] and t.applied for k, c in canon.items()
                      if k[0] == key[0] and k[1] < key[1] for t in c)
        what = (f"{here[0][0]} ({'applied' if here[0][1] else 'reported'})" if here
                else "- (repaired earlier)" if earlier
                else f"{','.join(other)} (applied: ANOTHER CODE)" if other else "- (MISSING)")
        name = f"{key[0]}:{key[1]} vs {against}" if cross else f"{key[1]}"
        lines.append(f"  request {name}: lint {f['code']} | diff {d} | report {excerpts.get(key)} | canonicalize {what}")
    return lines


def main(argv: list[str]) -> int:
    paths = argv or sorted(str(p) for p in (ROOT / "tests" / "fixtures" / "cases").glob("*.jsonl"))
    for path in paths:
        print("\n".join(one(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
