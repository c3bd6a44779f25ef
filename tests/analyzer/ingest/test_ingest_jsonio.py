"""Shared JSON helpers: layouts, line numbers, field checks, times and usage shapes."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest.base import RecordsSeen
from prefixcache.analyzer.ingest.detect import first_object, single_document
from prefixcache.analyzer.ingest.jsonio import (FieldError, check_head, expect, field, iter_jsonl, iter_records,
                                                parse_time, parse_usage, read_records)
from prefixcache.analyzer.ingest.sources import bytes_source
from prefixcache.analyzer.model import Skipped, Usage


def test_iter_jsonl_numbers_lines_and_skips_blank() -> None:
    src = bytes_source("x.jsonl", b'{"a": 1}\n\n  \n{"a": 2}\r\n{"a": \n')
    out = list(iter_jsonl(src))
    assert out[:2] == [(1, {"a": 1}), (4, {"a": 2})]
    assert isinstance(out[2], Skipped) and out[2].record == 5 and out[2].reason.startswith("truncated JSON")


@pytest.mark.parametrize("data, expect_records", [
    (b'[{"a": 1}, {"a": 2}]', [(1, "[0]", {"a": 1}), (2, "[1]", {"a": 2})]),
    (b'[\n  {"a": 1}\n]\n', [(1, "[0]", {"a": 1})]),
    (b'{\n  "a": 1,\n  "b": [1,\n 2]\n}\n', [(1, "", {"a": 1, "b": [1, 2]})]),
    (b'{"a": 1}\n{"a": 2}\n', [(1, "", {"a": 1}), (2, "", {"a": 2})]),
    (b'{"a": 1\n{"a": 2}\n', [(2, "", {"a": 2})]),  # first line cut: still JSONL, line 1 skipped
])
def test_iter_records_layouts(data, expect_records) -> None:
    out = list(iter_records(bytes_source("f", data)))
    if data.startswith(b'{"a": 1\n'):
        assert isinstance(out[0], Skipped) and out[0].record == 1 and out[1:] == expect_records
    else:
        assert out == expect_records


def test_single_truncated_document_names_line() -> None:
    with pytest.raises(InputError) as e:
        list(iter_records(bytes_source("f", b'{"a": 1')))
    assert str(e.value) == "f:1: truncated JSON (ends at column 8)"


def test_iter_records_truncated_list_keeps_the_items_before() -> None:
    first, cut = list(iter_records(bytes_source("f.json", b'[{"a": 1},')))
    assert first == (1, "[0]", {"a": 1})
    assert isinstance(cut, Skipped) and cut.record == 2 and cut.reason.startswith("truncated JSON")


def test_read_records_turns_field_errors_into_skips() -> None:
    def parse(value, prov):
        expect(value.get("n"), int, "n")
        return []
    out = list(read_records(bytes_source("f.jsonl", b'{"n": 1}\n{"n": "x"}\n'), parse))
    assert out == [Skipped("f.jsonl", 2, "expected int, got string", "n", True), RecordsSeen("f.jsonl", 2)]


def test_expect_and_field_messages() -> None:
    with pytest.raises(FieldError) as e:
        expect(5, (str, list), "messages[2].content")
    assert (e.value.field, e.value.reason) == ("messages[2].content", "expected string or list, got int")
    with pytest.raises(FieldError, match="expected int, got bool"):
        expect(True, int, "n")
    assert expect(3, float, "x") == 3
    with pytest.raises(FieldError) as e:
        field({"a": {}}, "b", str, "a", required=True)
    assert (e.value.field, e.value.reason) == ("a.b", "missing required field")
    assert field({"b": None}, "b", str, default="d") == "d"


def test_check_head() -> None:
    text = ('{"x": "' + "é" * 10).encode()
    assert check_head(text[:-1], "f").endswith("é" * 9)  # a character cut by the head limit is tolerated
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xff at offset 1\)"):
        check_head(b"a\xffbcdef", "f")
    with pytest.raises(InputError, match="binary file"):
        check_head(b"ab\x00c", "f")
    with pytest.raises(InputError, match="empty file"):
        check_head(b"  \n", "f")


def test_parse_time() -> None:
    assert parse_time("2025-09-03T00:52:35.592Z") == 1756860755.592
    assert parse_time("2025-01-20T20:29:13.5") == parse_time("2025-01-20T20:29:13.5+00:00") == 1737404953.5
    assert parse_time("2026-03-02 10:31:02 UTC") == 1772447462.0
    assert parse_time(1737433775) == 1737433775.0
    assert parse_time(1737433775123) == 1737433775.123  # milliseconds
    assert parse_time("27.5") == 27.5 and parse_time(None) is None
    with pytest.raises(FieldError, match="not a timestamp"):
        parse_time("yesterday")


def test_parse_usage_shapes() -> None:
    deepseek = {"completion_tokens": 77, "prompt_tokens": 1893, "total_tokens": 1970,
                "prompt_tokens_details": {"cached_tokens": 1856}, "prompt_cache_hit_tokens": 1856,
                "prompt_cache_miss_tokens": 37}
    assert parse_usage(deepseek) == Usage(1893, 1856, None, 77)
    anthropic = {"input_tokens": 3, "cache_creation_input_tokens": 1331, "cache_read_input_tokens": 14874,
                 "output_tokens": 172}
    assert parse_usage(anthropic) == Usage(3 + 1331 + 14874, 14874, 1331, 172)
    responses = {"input_tokens": 5120, "input_tokens_details": {"cached_tokens": 4864}, "output_tokens": 210}
    assert parse_usage(responses) == Usage(5120, 4864, None, 210)
    assert parse_usage({"prompt_tokens": 10, "completion_tokens": 2}) == Usage(10, None, None, 2)
    assert parse_usage(None) is None and parse_usage({}) is None
    with pytest.raises(FieldError) as e:
        parse_usage({"prompt_tokens": "x"}, "response.usage")
    assert e.value.field == "response.usage.prompt_tokens"


def test_first_object_and_single_document() -> None:
    assert first_object('[\n {"a": 1}, {"b": 2}') == {"a": 1}
    assert first_object('{"a": 1}\n{"a": 2}\n') == {"a": 1}
    assert first_object('{"a": [1, 2') is None and first_object("hello") is None
    assert single_document('{"a": 1}\n', complete=True)
    assert not single_document('{"a": 1}\n{"a": 2}\n', complete=True)
    assert single_document('{\n  "messages": [', complete=False)
    assert not single_document('{"a": 1}\n{"a": 2', complete=False)
    assert not single_document("[1, 2]", complete=True)

