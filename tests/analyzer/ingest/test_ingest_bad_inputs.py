"""Every bad-input kind is accounted for as a Skipped naming file, line and field — never a traceback."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest import Ingest, skipped_message
from prefixcache.analyzer.ingest.jsonio import HEAD_BYTES, load_json
from prefixcache.analyzer.ingest.sources import file_source

GOOD = {"model": "gpt-4o", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}


def _jsonl(*records: object) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def _run(path: Path, data: bytes, **kw):
    path.write_bytes(data)
    ing = Ingest([str(path)], **kw)
    reqs = list(ing)
    return reqs, ing.summary


def test_truncated_jsonl_line(tmp_path) -> None:
    data = _jsonl(GOOD, GOOD) + orjson.dumps(GOOD)[:40] + b"\n"
    reqs, s = _run(tmp_path / "cut.jsonl", data)
    assert len(reqs) == 2 and s.records == 3
    (k,) = s.skipped
    assert (k.record, k.bad) == (3, True)
    assert skipped_message(k) == f"{tmp_path / 'cut.jsonl'}:3: truncated JSON (ends at column 41)"


def test_wrong_schema_names_line_and_field(tmp_path) -> None:
    bad = {"model": "gpt-4o", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                           {"role": "user", "content": 5}]}
    reqs, s = _run(tmp_path / "x.jsonl", _jsonl(GOOD, GOOD, bad, GOOD))
    assert len(reqs) == 3 and s.records == 4
    (k,) = s.skipped
    assert skipped_message(k) == f"{tmp_path / 'x.jsonl'}:3 field messages[2].content: expected string or list, got int"


@pytest.mark.parametrize("record, field, reason", [
    ({"model": "m", "messages": [{"content": "no role"}]}, "messages[0].role", "missing required field"),
    ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role", "unknown role 'wizard'"),
    ({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}]},
     "messages[0].tool_calls[0].function.name", "missing required field"),
    ({"model": "m", "messages": [], "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]},
     "tools[0].parameters", "expected object, got list"),
    ({"model": "m", "messages": "hello"}, "messages", "expected list, got string"),
])
def test_schema_errors_openai(tmp_path, record, field, reason) -> None:
    _, s = _run(tmp_path / "s.jsonl", _jsonl(GOOD, record), format="openai-chat")
    (k,) = s.skipped
    assert (k.record, k.field, k.reason, k.bad) == (2, field, reason, True)


def test_schema_error_anthropic_block(tmp_path) -> None:
    rec = {"model": "claude-sonnet-4-5", "max_tokens": 10, "system": "s",
           "messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]}
    _, s = _run(tmp_path / "a.jsonl", _jsonl(rec))
    (k,) = s.skipped
    assert (k.record, k.field, k.reason) == (1, "messages[0].content[0].tool_use_id", "missing required field")


def test_binary_file(tmp_path) -> None:
    reqs, s = _run(tmp_path / "blob.jsonl", b"\x00\x01\x02\xff\xfe binary")
    assert reqs == [] and s.files == 1 and s.records == 0
    (k,) = s.skipped
    assert (k.record, k.bad) == (0, True)
    assert skipped_message(k) == f"{tmp_path / 'blob.jsonl'}: binary file (NUL byte at offset 0)"


def test_not_utf8_file(tmp_path) -> None:
    _, s = _run(tmp_path / "latin1.jsonl", '{"model": "gpt-4o", "messages": [{"role": "user", "content": "café"}]}\n'
                .encode("latin-1"))
    (k,) = s.skipped
    assert (k.record, k.bad) == (0, True)
    assert k.reason == "not UTF-8 text (byte 0xe9 at offset 65)"


def test_not_utf8_line_after_head(tmp_path) -> None:
    """A bad byte past the 64 KiB head is caught on its line, and the rest of the file still reads."""
    n = HEAD_BYTES // len(_jsonl(GOOD)) + 2
    data = _jsonl(*[GOOD] * n) + b'{"model": "m", "messages": [{"role": "user", "content": "\xff"}]}\n' + _jsonl(GOOD)
    reqs, s = _run(tmp_path / "late.jsonl", data)
    assert len(reqs) == n + 1
    (k,) = s.skipped
    assert (k.record, k.reason, k.bad) == (n + 1, "not UTF-8 text", True)


def test_empty_and_blank_files(tmp_path) -> None:
    for name, data in (("empty.jsonl", b""), ("blank.json", b"\n  \n")):
        reqs, s = _run(tmp_path / name, data)
        assert reqs == [] and [(k.record, k.reason, k.bad) for k in s.skipped] == [(0, "empty file", True)]


def test_unknown_format(tmp_path) -> None:
    _, s = _run(tmp_path / "other.jsonl", _jsonl({"foo": 1}, {"foo": 2}))
    (k,) = s.skipped
    assert k.record == 0 and k.bad and k.reason.startswith("unknown format (starts with '{\"foo\":1} {\"foo\":2}")
    assert "--input-format" in k.reason


def test_truncated_json_document_names_its_line(tmp_path) -> None:
    text = orjson.dumps([GOOD, GOOD], option=orjson.OPT_INDENT_2)
    path = tmp_path / "list.json"
    path.write_bytes(text[:-30])
    with pytest.raises(InputError) as e:
        load_json(file_source(str(path)))
    line = text[:-30].count(b"\n") + 1
    assert (e.value.record, e.value.reason) == (line, e.value.reason)
    assert str(e.value).startswith(f"{path}:{line}: truncated JSON")
    _, s = _run(path, text[:-30])
    (k,) = s.skipped  # issue 16: the records before the damage are kept; the skip names item and line
    assert (k.record, k.field, k.bad) == (2, "[1]", True) and k.reason.startswith("truncated JSON")
    assert f"line {line}" in k.reason and "kept" in k.reason


def test_list_document_with_bad_item(tmp_path) -> None:
    data = orjson.dumps([GOOD, {"model": "m", "messages": [{"role": "user", "content": {"x": 1}}]}])
    reqs, s = _run(tmp_path / "bodies.json", data)
    assert len(reqs) == 1 and s.records == 2
    (k,) = s.skipped
    assert (k.record, k.field, k.reason) == (2, "messages[0].content", "expected string or list, got object")


def test_openhands_trajectory_bad_event(tmp_path) -> None:
    events = [{"id": 0, "source": "agent", "action": "run",
               "tool_call_metadata": {"model_response": {"id": "r1", "usage": {"prompt_tokens": "many"}}}}]
    _, s = _run(tmp_path / "traj.json", orjson.dumps(events))
    (k,) = s.skipped
    assert (k.record, k.field, k.reason, k.bad) == (
        1, "[0].tool_call_metadata.model_response.usage.prompt_tokens", "expected int, got string", True)


def test_not_utf8_late_in_json_document(tmp_path) -> None:
    body = orjson.dumps([GOOD] * (HEAD_BYTES // 80 + 10))
    data = body[:-1] + b', {"model": "m", "messages": [{"role": "user", "content": "\xff"}]}]'
    reqs, s = _run(tmp_path / "late.json", data)
    assert reqs == []
    (k,) = s.skipped
    assert (k.record, k.bad) == (0, True) and k.reason == f"not UTF-8 text (byte 0xff at offset {data.index(0xff)})"
