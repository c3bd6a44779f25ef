"""Fuzzing the readers and the CLI (hypothesis, fixed seed and budget: a few seconds).

Inputs are valid agent-log records cut, spliced with junk bytes, nested deeply or
replaced by arbitrary bytes; every reader (auto-detected and forced) must turn them
into requests and skips — never an exception other than the library's own
``PrefixcacheError`` — and the CLI must exit 0, 1 or 2 with no traceback.
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.gen_corpus import record
from tests.helpers import cli_app

from prefixcache.analyzer.errors import PrefixcacheError
from prefixcache.analyzer.ingest import Ingest, formats
from prefixcache.analyzer.ingest.sources import bytes_source
from prefixcache.analyzer.model import Skipped

SEEDS = [
    b"".join(json.dumps(record(i)).encode() + b"\n" for i in range(3)),
    json.dumps([record(0), record(1)], indent=1).encode(),
    json.dumps(record(2), indent=2).encode(),
    b'{"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}}\n',
    b'{"timestamp": 1, "input_length": 40, "output_length": 5, "hash_ids": [1, 2, 3]}\n',
]

FUZZ = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A seed cut, spliced with junk or nested deeply, or plain random bytes."""
    kind = draw(st.sampled_from(["cut", "splice", "nest", "bytes", "text"]))
    seed = draw(st.sampled_from(SEEDS))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "text":
        return draw(st.text(alphabet='{}[]":,0123456789 \n\\eE.-tfnulra', max_size=300)).encode()
    at = draw(st.integers(0, len(seed)))
    if kind == "cut":
        return seed[:at]
    if kind == "nest":
        depth = draw(st.integers(100, 3000))
        return seed[:at] + b"[" * depth + b"]" * draw(st.integers(0, depth)) + seed[at:]
    return seed[:at] + draw(st.binary(min_size=1, max_size=20)) + seed[at:]


def _read(data: bytes, fmt: str) -> None:
    try:
        ing = Ingest(["-"], format=fmt, stdin=_Stream(data))
        n = sum(1 for _ in ing)
    except PrefixcacheError:
        return
    assert ing.summary.requests == n
    assert all(isinstance(s, Skipped) and isinstance(s.reason, str) for s in ing.summary.skipped)


class _Stream:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data


@FUZZ
@given(data=damaged())
def test_auto_detected_readers_never_crash(data: bytes) -> None:
    _read(data, "auto")


@FUZZ
@given(data=damaged(), fmt=st.sampled_from(formats()))
def test_forced_readers_never_crash(data: bytes, fmt: str) -> None:
    _read(data, fmt)


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=damaged(), command=st.sampled_from(["inspect", "lint", "simulate"]))
def test_cli_exits_cleanly(data: bytes, command: str) -> None:
    res = CliRunner().invoke(cli_app(), [command, "-", "--json"], input=data)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in (0, 1, 2) and "Traceback" not in res.stderr


def test_bytes_source_round_trip() -> None:
    assert bytes_source("-", b"x").open().read() == b"x"
