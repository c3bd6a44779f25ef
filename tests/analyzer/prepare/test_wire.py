"""The executor's wire (``prepare/wire.py``): what a worker sends back per request is the change from its
session's previous rendering, and the driver rebuilds every rendering and token list exactly, on every
shared sample, with sessions evicted on both sides, interleaved and in chunks."""

from __future__ import annotations

import pickle
from array import array
from types import SimpleNamespace

import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import RenderedPrompt, Request, Segment, TokenizedPrompt
from prefixcache.analyzer.prepare import Preparer, usage_only
from prefixcache.analyzer.prepare.wire import Decoder, Encoder
from tests.helpers import SAMPLES, existing


def _prepared(path) -> tuple[list[Request], list]:
    reqs = [r for r in Ingest([str(path)]) if r.trace is None and not usage_only(r)]
    p = Preparer()
    return reqs, [p.render_tokenize(r) for r in reqs]


def _roundtrip(reqs, results, sessions: int, chunk: int) -> tuple[list, int, int]:
    enc, dec = Encoder(sessions), Decoder()
    out, sent, full = [], 0, 0
    for i in range(0, len(reqs), chunk):
        blob = pickle.dumps(enc.encode(reqs[i:i + chunk], results[i:i + chunk]), 5)  # as Ray ships it
        sent += len(blob)
        out += dec.decode(pickle.loads(blob))
        full += len(pickle.dumps(results[i:i + chunk], 5))
    return out, sent, full


@pytest.mark.parametrize("name", ["claude_code_session_v1.0.98_fe5e1c67.jsonl",
                                  "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"])
def test_the_driver_rebuilds_every_rendering_and_token_list_of_a_sample(name) -> None:
    reqs, results = _prepared(existing(SAMPLES) / name)
    assert len(reqs) >= 10
    out, sent, full = _roundtrip(reqs, results, sessions=256, chunk=7)
    assert out == results  # text, segments, ids and every other field, request for request
    assert all(type(o[1].ids) is type(r[1].ids) and o[1].ids.typecode == r[1].ids.typecode
               for o, r in zip(out, results))
    assert sent * 2 < full  # the point: a session's later prompts travel as their new turns only


def test_every_sample_round_trips_with_sessions_evicted_and_interleaved() -> None:
    """All samples in one stream (sessions of several files interleaved), each side keeping only 2 sessions:
    an evicted session's next request is sent whole, and the decoder drops exactly what the encoder dropped."""
    reqs, results = [], []
    for path in sorted(p for p in existing(SAMPLES).iterdir() if p.is_file() and p.suffix != ".md"):
        try:
            r, res = _prepared(path)
        except Exception:  # noqa: BLE001 - a sample this test cannot prepare (block traces have no text)
            continue
        reqs += r
        results += res
    order = sorted(range(len(reqs)), key=lambda i: (i % 3, i))  # interleave the files' sessions
    reqs, results = [reqs[i] for i in order], [results[i] for i in order]
    assert len({r.session for r in reqs}) >= 5
    out, _, _ = _roundtrip(reqs, results, sessions=2, chunk=5)
    assert out == results


def test_an_error_travels_in_place_and_a_changed_id_type_is_sent_whole() -> None:
    seg = (Segment("message", "messages[0]", 0, 5, 0),)
    a = (RenderedPrompt("hello", seg, "t"), TokenizedPrompt(array("I", [1, 2, 3]), seg, "tok"))
    b = (RenderedPrompt("hello world", seg, "t"), TokenizedPrompt(array("q", [-7, 1, 2, 3, 4]), seg, "tok", opaque_prefix_tokens=1))
    reqs = [SimpleNamespace(session="s")] * 3  # the encoder reads only the session
    err = ValueError("bad template")
    enc, dec = Encoder(), Decoder()
    out = dec.decode(pickle.loads(pickle.dumps(enc.encode(reqs, [a, err, b]))))
    assert out[0] == a and out[1] is not err and isinstance(out[1], ValueError) and out[2] == b
    assert out[2][1].ids.typecode == "q"
