"""The resource-limit corpus of issue 28, generated at test time (nothing large is committed).

``build(root, scale=1)`` writes decompression bombs, a tool call whose ``arguments``
string nests 5,000 deep, and hostile templates that go for memory rather than time,
and returns them as :class:`~tests.fuzz.gen_corpus.Case` s. ``scale`` sets the bombs'
expanded size in GiB (1 = 1 GiB; the suite passes 0.25, the bench 2). A bomb is built
from one compressed chunk repeated as gzip members / zstd frames, so even a 2 GiB bomb
takes well under a second to write.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.fuzz.gen_corpus import Case, record

#: One decompressed chunk of a bomb (bytes).
CHUNK = 16 * 1024 * 1024

#: Templates that build big values inside one C call (no output, no jinja call to check at).
MEMORY_TEMPLATES: dict[str, str] = {
    "pct_width": "{% for i in range(20) %}{{ ('%*s' % (16000000, 'x'))[:1] }}{% endfor %}",
    "format_width": "{% for i in range(20) %}{% set s = '{:>{}}'.format('x', 16000000) %}{% endfor %}{{ 1 }}",
    "filter_format_width": "{% for i in range(20) %}{% set s = '%16000000s' | format('x') %}{% endfor %}{{ 1 }}",
    "split_huge": "{% set s = 'a ' * 8000000 %}{% for i in range(100) %}{% set n = s.split() | length %}{% endfor %}"
                  "{{ 1 }}",
    "sort_huge": "{{ ((range(100000) | list) * 160) | sort | length }}",
    "strftime_width": "{{ strftime_now('%16000000d') | length }}",
    "tojson_laughs": "{% set a = ['xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'] %}"
                     + "".join("{% set a = [a, a, a, a, a, a, a, a, a, a] %}" for _ in range(9))
                     + "{{ a | tojson }}",
    "near_cap_then_multiply": "{% set s = 'x' * 16000000 %}{% set t = [s, s, s, s, s, s, s, s] %}"
                              "{{ (t * 2) | join | length }}{{ (t * 100) | join | length }}",
}


def _gzip_bomb(path: Path, head: bytes, body: bytes, tail: bytes, size: int) -> None:
    member = gzip.compress(body * (CHUNK // len(body)), compresslevel=9, mtime=0)
    with open(path, "wb") as f:
        f.write(gzip.compress(head, mtime=0))
        for _ in range(max(1, size // CHUNK)):
            f.write(member)
        f.write(gzip.compress(tail, mtime=0))


def _zstd_bomb(path: Path, head: bytes, body: bytes, tail: bytes, size: int) -> None:
    import zstandard

    cctx = zstandard.ZstdCompressor(level=3)
    chunk = body * (CHUNK // len(body))
    with open(path, "wb") as f, cctx.stream_writer(f, closefd=False) as w:
        w.write(head)
        for _ in range(max(1, size // CHUNK)):
            w.write(chunk)
        w.write(tail)


def build(root: str | Path, scale: float = 1.0) -> list[Case]:
    """Write the limit corpus under ``root`` (created) and return its cases."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    size = int(scale * (1 << 30))
    out: list[Case] = []
    gb = f"{size / (1 << 30):g} GiB"

    line_head = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "'
    line_tail = b'"}]}\n'
    p = root / "bomb_line.jsonl.gz"
    _gzip_bomb(p, line_head, b"a", line_tail, size)
    out.append(Case("bomb_line.jsonl.gz", "log", str(p), 1, note=f"gzip: one line expanding to {gb}"))
    p = root / "bomb_line.jsonl.zst"
    _zstd_bomb(p, line_head, b"a", line_tail, size)
    out.append(Case("bomb_line.jsonl.zst", "log", str(p), 1, note=f"zstd: one line expanding to {gb}"))
    item = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode() + b","
    p = root / "bomb_list.json.gz"
    _gzip_bomb(p, b"[", item, b"{}]", size)
    out.append(Case("bomb_list.json.gz", "log", str(p), 1, note=f"gzip: one JSON list expanding to {gb}"))
    p = root / "bomb_lines.jsonl.gz"
    _gzip_bomb(p, b"", json.dumps(record(0, content="a" * 30000)).encode() + b"\n", b"", size)
    out.append(Case("bomb_lines.jsonl.gz", "log", str(p), None, note=f"gzip: many small lines expanding to {gb}"))

    deep = "[" * 5000 + "]" * 5000
    rec = record(1)
    rec["messages"].insert(2, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": deep}}]})
    rec["messages"].insert(3, {"role": "tool", "tool_call_id": "c1", "content": "ok"})
    again = json.loads(json.dumps(rec))  # the call resent with other whitespace: canonicalize compares the two
    again["messages"][2]["tool_calls"][0]["function"]["arguments"] = deep + " "
    again["messages"].append({"role": "user", "content": "next"})
    p = root / "deep_arguments.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in (record(0), rec, again)))
    out.append(Case("deep_arguments.jsonl", "log", str(p), 3, note="tool-call arguments string nested 5,000 deep"))

    folder = root / "templates"
    folder.mkdir(exist_ok=True)
    ctx = folder / "context.json"
    ctx.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    for name, source in MEMORY_TEMPLATES.items():
        path = folder / f"{name}.jinja"
        path.write_text(source)
        out.append(Case(name, "template", str(path), None, context=str(ctx)))
    path = folder / "huge_file.jinja"
    with open(path, "w") as f:  # just under MAX_TEMPLATE_BYTES (4 MiB): compiling it is what takes the time
        for i in range(60_000):
            f.write(f"{{% if messages|length > {i} %}}{{{{ messages[0].content }}}}{{% endif %}}\n")
    out.append(Case("huge_file", "template", str(path), None, context=str(ctx), note="a 3.9 MB template"))
    path = folder / "over_size.jinja"
    path.write_text("{{ 1 }}" * (1 << 20))
    out.append(Case("over_size", "template", str(path), None, context=str(ctx), note="a 7 MiB template"))
    return out
