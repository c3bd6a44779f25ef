"""The hostile-input corpus of issue 16, generated (nothing large is committed).

``build(root, scale=1)`` writes every case under ``root`` and returns the list of
:class:`Case` s: log inputs (for inspect, lint, simulate, canonicalize, replay) and
chat templates (for check, ``inspect --template`` and ``lint --template``), each
with the number of records a command must account for. ``scale`` multiplies the
sizes of the "very long string" cases (1 = 1 MB strings, fast enough for the test
suite; the benches pass more).

Run as a script to write the corpus somewhere: ``python -m tests.fuzz.gen_corpus DIR``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: How deep the "deeply nested JSON" cases nest.
DEEP = 100_000


@dataclass(frozen=True)
class Case:
    """One hostile input. ``kind`` is ``log`` (``path`` is the input argument; ``-`` reads
    ``stdin``: bytes, or None for a closed stdin) or ``template`` (``path`` is the template,
    ``context`` a JSON context for check). ``records``: input records a command must account
    for (requests + skipped), None when not counted (a FIFO, a template)."""

    name: str
    kind: str
    path: str
    records: int | None = None
    stdin: bytes | None = b""
    context: str = ""
    note: str = ""
    extra: tuple[str, ...] = field(default_factory=tuple)


def record(i: int = 0, content: object = None, tools: object = None) -> dict:
    """One OpenAI-chat request record of an append-only session (``i`` more turns each)."""
    msgs = [{"role": "system", "content": "You are a coding agent. Rules: read before you edit."}]
    for k in range(i + 1):
        msgs.append({"role": "user", "content": f"step {k}: fix the failing test" if content is None or k < i else content})
        if k < i:
            msgs.append({"role": "assistant", "content": f"done step {k}"})
    rec: dict = {"model": "gpt-4o", "user": "s1", "messages": msgs}
    rec["tools"] = tools if tools is not None else [
        {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
    return rec


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _deep_list(n: int) -> str:
    return "[" * n + "]" * n


def _deep_obj(n: int) -> str:
    return '{"a":' * n + "{}" + "}" * n


def _splice(rec: dict, marker: str, raw: str) -> bytes:
    """``rec`` as one JSON line with the string ``marker`` replaced by raw JSON text."""
    return json.dumps(rec).replace(json.dumps(marker), raw).encode() + b"\n"


def _logs(root: Path, scale: float) -> list[Case]:
    out: list[Case] = []

    def put(name: str, data: bytes, records: int | None, note: str = "") -> None:
        (root / name).write_bytes(data)
        out.append(Case(name, "log", str(root / name), records, note=note))

    good = [record(i) for i in range(3)]
    good_lines = b"".join(_line(r) for r in good)
    put("good.jsonl", good_lines, 3, "control: three good requests")
    put("deep_content.jsonl", _line(good[0]) + _splice(record(1, content="@@"), "@@", _deep_list(DEEP)), 2,
        "content nested 100,000 deep")
    put("deep_tool_schema.jsonl", _line(good[0]) + _splice(
        record(1, tools=[{"type": "function", "function": {"name": "t", "parameters": "@@"}}]), "@@", _deep_obj(DEEP)),
        2, "tool schema nested 100,000 deep")
    put("deep_500.jsonl", _line(good[0]) + _splice(
        record(1, tools=[{"type": "function", "function": {"name": "t", "parameters": "@@"}}]), "@@", _deep_obj(500)),
        2, "tool schema nested 500 deep (orjson accepts it)")
    deep_doc = "[" + json.dumps(good[0]) + "," + json.dumps(record(1, content="@@")).replace('"@@"', _deep_list(DEEP)) + "]"
    put("deep_in_list.json", deep_doc.encode(), 2, "a JSON list whose 2nd item is nested 100,000 deep")
    put("deep_pretty.json", ("{\n" + '"messages": ' + _deep_list(DEEP) + "\n}").encode(), 1,
        "a pretty-printed document nested 100,000 deep")
    big = int(1_000_000 * scale)
    put("long_strings.jsonl", b"".join(_line(record(i, content="x " * (big // 2) + f"tail {i}")) for i in range(4)), 4,
        f"4 requests with {big / 1e6:g} MB strings")
    put("long_line_no_space.jsonl", _line(record(0, content="a" * big)), 1, f"a {big / 1e6:g} MB word")
    lst = json.dumps(good, indent=1).encode()
    put("truncated_list.json", lst[: len(lst) * 2 // 3], 3, "a JSON list cut at two thirds")
    put("trailing_garbage_list.json", lst + b"\n}garbage", 4, "a JSON list followed by garbage")
    doc = json.dumps(good[2], indent=1).encode()
    put("truncated_object.json", doc[: len(doc) // 2], 1, "one pretty-printed request cut in half")
    put("trailing_garbage_object.json", doc + b"\nxyz", 2, "one request followed by garbage")
    put("truncated_jsonl.jsonl", good_lines[:-40], 3, "last JSONL line cut")
    put("binary.jsonl", b"\x00\x01\x02" * 100, 1, "binary")
    put("latin1.jsonl", _line(record(0)).replace(b"coding", b"c\xf6ding"), 1, "not UTF-8")
    put("empty.jsonl", b"", 1, "empty file")
    put("blank.jsonl", b"\n \n\t\n", 1, "only whitespace")
    put("bom.jsonl", b"\xef\xbb\xbf" + good_lines, 1, "UTF-8 byte-order mark (refused as a whole file)")
    put("crlf.jsonl", good_lines.replace(b"\n", b"\r\n"), 3, "CRLF line ends")
    put("big_int.jsonl", _line(good[0]) + b'{"messages": [{"role": "user", "content": "x"}], "created": 1' + b"0" * 400 + b"}\n",
        2, "an integer of 400 digits")
    put("nan.jsonl", _line(good[0]) + b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}\n', 2, "NaN")
    put("surrogate.jsonl", _line(good[0]) + b'{"messages": [{"role": "user", "content": "bad \\ud800 half"}]}\n', 2,
        "a lone UTF-16 surrogate escape")
    put("nul_in_string.jsonl", _line(record(0, content="a\u0000b")), 1, "a NUL character in a string")
    put("wrong_types.jsonl", _line(good[0]) + _line({"messages": [{"role": "user", "content": 7}]})
        + _line({"messages": "nope"}) + _line([1, 2]), 4, "fields of the wrong type")
    put("scalar.json", b"42\n", 1, "a bare number")
    put("secret_unknown.jsonl", _line({"api_key": "sk-live-0123456789abcdef0123456789", "x": 1}), 1,
        "unknown format starting with a secret")
    tools = [{"type": "function", "function": {"name": f"t{i}", "description": "d" * 50,
                                                "parameters": {"type": "object", "properties": {}}}} for i in range(1000)]
    put("many_tools.jsonl", _line(record(0, tools=tools)) + _line(record(1, tools=tools)), 2, "1000 tools")
    put("many_messages.jsonl", _line(record(3000)), 1, "one request with 6,000 messages")
    put("control_chars.jsonl", _line(record(0, content="\x1b[31mred\x1b[0m \u202e rtl \r\r\u2028")), 1,
        "terminal escapes and odd line separators")
    return out


def _special(root: Path) -> list[Case]:
    out: list[Case] = []
    fifo = root / "fifo.jsonl"
    os.mkfifo(fifo)
    out.append(Case("fifo", "log", str(fifo), None, note="a FIFO with no writer, named explicitly"))
    folder = root / "dir_with_fifo"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(_line(record(0)))
    os.mkfifo(folder / "b.jsonl")
    out.append(Case("dir_with_fifo", "log", str(folder), 2, note="a folder holding a good file and a FIFO"))
    loop = root / "dir_with_loop"
    loop.mkdir()
    (loop / "a.jsonl").write_bytes(_line(record(0)))
    os.symlink("..", loop / "up")
    os.symlink("missing.jsonl", loop / "dangling.jsonl")
    out.append(Case("dir_with_links", "log", str(loop), 2, note="a folder with a link loop and a dangling link"))
    out.append(Case("stdin_closed", "log", "-", 0, stdin=None, note="stdin closed (not empty)"))
    out.append(Case("stdin_empty", "log", "-", 1, stdin=b"", note="stdin empty"))
    return out


#: Hostile chat templates: name → Jinja source (each must end in a clean error or a bounded render).
TEMPLATES: dict[str, str] = {
    "range_huge": "{% for i in range(10**10) %}x{% endfor %}",
    "range_nested": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "str_mul": "{{ 'a' * 10**10 }}",
    "list_mul": "{{ ([1] * 10**10) | length }}",
    "pow_huge": "{{ 10 ** 10 ** 10 }}",
    "str_doubling": "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
    "recursive_macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "recursive_loop": "{% for m in messages recursive %}{{ loop([m]) }}{% endfor %}",
    "deep_nesting": "{% if true %}" * 200 + "x" + "{% endif %}" * 200,
    "deep_expr": "{{ " + "(" * 2000 + "1" + ")" * 2000 + " }}",
    "thousand_ifs": "".join(f"{{% if messages|length > {i} %}}" for i in range(1000)) + "y" + "{% endif %}" * 1000,
    "syntax_error": "{% for m in messages %}{{ m.content }\n{% endfor %}",
    "unclosed_block": "{% if messages %}never closed",
    "unknown_tag": "{% frobnicate %}",
    "center_huge": "{{ 'a'.center(10**10) }}",
    "filter_huge": "{{ 'a' | indent(10**10, true) }}",
    "format_huge": "{{ '%*d' % (10**10, 1) }}",
    "output_flood": "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
    "dunder_escape": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "globals_escape": "{{ self.__init__.__globals__ }}",
    "cycler_escape": "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "attr_escape": "{{ messages | attr('__class__') }}",
    "mutate_list": "{% set x = messages.append(1) %}{{ x }}",
    "include_parent": "{% include '../outside.txt' %}",
    "include_absolute": "{% include '/etc/passwd' %}",
    "include_symlink": "{% include 'leak.txt' %}",
    "include_self": "{% include 'include_self.jinja' %}",
    "import_missing": "{% import 'nope.jinja' as n %}",
    "raise_exception": "{{ raise_exception('rejected by template') }}",
    "undefined_call": "{{ nope() }}",
    "zero_div": "{{ 1 / 0 }}",
    "lone_surrogate": "{{ '\\ud800' }}",
}


def _templates(root: Path) -> list[Case]:
    folder = root / "templates"
    folder.mkdir()
    (root / "outside.txt").write_text("SECRET-OUTSIDE-THE-TEMPLATE-FOLDER\n")
    os.symlink(str(root / "outside.txt"), folder / "leak.txt")
    ctx = folder / "context.json"
    ctx.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "_prefixcache": {"now": "2026-03-02T09:05:40Z"}}))
    out = []
    for name, source in TEMPLATES.items():
        path = folder / f"{name}.jinja"
        path.write_text(source)
        out.append(Case(name, "template", str(path), None, context=str(ctx)))
    return out


def build(root: str | Path, scale: float = 1.0) -> list[Case]:
    """Write the whole corpus under ``root`` (created) and return its cases."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    return _logs(root, scale) + _special(root) + _templates(root)


if __name__ == "__main__":
    cases = build(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
    for c in cases:
        print(f"{c.kind:8} {c.name:28} {c.note}")
