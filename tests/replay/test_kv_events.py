"""vLLM KV-cache events: the wire format, the subscriber, and the ledger that checks every
request's cached tokens against the engine's own order of block registration and removal.

The batches are built as vLLM 0.32's ``ZmqEventPublisher`` sends them (``vllm/distributed/kv_events.py``:
multipart ``(topic, seq as 8-byte big-endian, msgpack [ts, [event maps tagged by "type"], dp_rank])``;
the field names were checked against a live vLLM CPU server's stream). The ledger scenarios are the
ones a concurrent replay meets: a reuse, a block evicted before reuse, a concurrent request that
registered a block first, a request scheduled before the one that registers its prefix."""

from __future__ import annotations

import time

import msgpack
import pytest
import zmq

from prefixcache.analyzer.cache.index.block_hash import hash_blocks
from prefixcache.analyzer.errors import ConfigError
from prefixcache.replay.server.kvevents import KVEventSubscriber, decode, parse_endpoint
from prefixcache.replay.server.ledger import Sent, engine_survival, reconcile, tag_of

BS = 4
A, B, C, D = (1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12), (13, 14, 15, 16)


class Engine:
    """Builds vLLM-shaped event batches; engine hashes are deliberately unlike ours."""

    def __init__(self) -> None:
        self.seq = 0
        self.ts = 1000.0
        self.batches: list[bytes] = []

    def h(self, *blocks) -> int:
        return 7_000_000 + hash(tuple(blocks)) % 1_000_000

    def stored(self, tag: str | None, prefix: tuple, blocks: tuple) -> dict:
        """``blocks`` (tuples of BS tokens) registered after the blocks ``prefix``."""
        hashes = [self.h(*prefix, *blocks[:i + 1]) for i in range(len(blocks))]
        ev = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": self.h(*prefix) if prefix else None,
              "token_ids": [t for b in blocks for t in b], "block_size": BS, "lora_id": None, "medium": "GPU",
              "lora_name": None, "extra_keys": [None] * len(blocks), "group_idx": 0,
              "kv_cache_spec_kind": "full_attention"}
        if tag is not None:
            ev["session_id"] = tag
        return ev

    def removed(self, *chain) -> dict:
        return {"type": "BlockRemoved", "block_hashes": [self.h(*chain)], "medium": "GPU", "group_idx": 0}

    def batch(self, *events) -> None:
        self.batches.append(msgpack.packb([self.ts, list(events), 0]))
        self.ts += 1.0

    def events(self):
        return [e for i, p in enumerate(self.batches) for e in decode(i, p, float(i))]


def _sent(name, pos, blocks, t_send, cached, predicted):
    return Sent(name, pos, tuple(t for b in blocks for t in b) + (99,), t_send, cached, predicted)


def test_decode_reads_vllms_batch():
    eng = Engine()
    eng.batch({"type": "AllBlocksCleared"}, eng.stored("prefixcache:warm:0", (), (A, B)), eng.removed(A, B))
    evs = decode(5, eng.batches[0], 12.5)
    assert [e.type for e in evs] == ["cleared", "stored", "removed"]
    s = evs[1]
    assert (s.seq, s.index, s.ts, s.t_recv, s.block_size, s.tag) == (5, 1, 1000.0, 12.5, BS, "prefixcache:warm:0")
    assert s.parent is None and s.tokens == A + B and s.hashes == (eng.h(A), eng.h(A, B))
    assert evs[2].hashes == (eng.h(A, B),)
    with pytest.raises(ValueError):
        decode(0, msgpack.packb({"not": "a batch"}), 0.0)


def test_endpoints():
    assert parse_endpoint("tcp://127.0.0.1:5557") == ("tcp://127.0.0.1:5557", False)
    assert parse_endpoint("bind:tcp://127.0.0.1:5557") == ("tcp://127.0.0.1:5557", True)
    with pytest.raises(ConfigError, match="--kv-events"):
        parse_endpoint("127.0.0.1:5557")


def test_subscriber_receives_from_a_connecting_publisher_and_counts_lost_batches():
    """A real ZeroMQ PUB that connects (vLLM with a non-wildcard endpoint) to the bound subscriber."""
    with zmq.Context() as probe:
        s = probe.socket(zmq.SUB)
        port = s.bind_to_random_port("tcp://127.0.0.1")
        s.close(linger=0)
    sub = KVEventSubscriber(f"bind:tcp://127.0.0.1:{port}", settle_s=0.0).start()
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.connect(f"tcp://127.0.0.1:{port}")
    time.sleep(0.5)
    eng = Engine()
    for _ in range(4):
        eng.batch(eng.stored(None, (), (A,)))
    for seq in (0, 1, 3):  # batch 2 lost
        pub.send_multipart((b"", seq.to_bytes(8, "big"), eng.batches[seq]))
    pub.send_multipart((b"", b"x", b"y", b"z"))  # not a batch: counted, not fatal
    events = sub.stop()
    pub.close(linger=0)
    ctx.term()
    assert [e.seq for e in events] == [0, 1, 3]
    assert sub.batches == 3 and sub.missing == 1 and sub.errors == 1
    assert all(e.t_recv > 0 for e in events)


def test_ledger_accounts_reuse_and_names_the_event_behind_each_difference():
    eng = Engine()
    w = lambda i: tag_of("warm", i)  # noqa: E731
    # batch 0: reset; r0 registers A B C
    eng.batch({"type": "AllBlocksCleared"}, eng.stored(w(0), (), (A, B, C)))
    # batch 1: r1 (A B D) reuses A B, registers D
    eng.batch(eng.stored(w(1), (), (A, B)), eng.stored(w(1), (A, B), (D,)))
    # batch 2: the pool evicts C (tail first), then r2 (A B C) reuses A B and registers C again
    eng.batch(eng.removed(A, B, C), eng.stored(w(2), (), (A, B)), eng.stored(w(2), (A, B), (C,)))
    # batch 3: r4 was sent after r3 but the engine schedules it first: it registers B' = (A, D)...
    eng.batch(eng.stored(w(4), (), (A,)), eng.stored(w(4), (A,), (D,)))
    # ... and r3 (A D), sent before r4, reuses A D
    eng.batch(eng.stored(w(3), (), (A, D)))
    sent = [
        _sent("warm", 0, (A, B, C), 0.0, 0, 0),
        _sent("warm", 1, (A, B, D), 1.0, 8, 8),          # reconciles
        _sent("warm", 2, (A, B, C), 2.0, 8, 12),         # model still held C: removed before reuse
        _sent("warm", 3, (A, D), 3.0, 8, 4),             # r4 registered D first
        _sent("warm", 4, (A, D), 3.5, 4, 8),             # the model gave r3's D to r4: not registered yet
    ]
    checks = {c.position: c for c in reconcile(sent, eng.events(), BS)}
    assert [checks[i].event_cached for i in range(5)] == [0, 8, 8, 8, 4]
    assert all(c.accounted for c in checks.values())
    assert checks[0].fact == checks[1].fact == ""
    assert checks[2].fact.startswith("block removed before reuse: block 2") and "batch 2" in checks[2].fact
    assert checks[3].fact.startswith("a concurrent request registered first: block 1") and "warm #4" in checks[3].fact
    assert checks[4].fact.startswith("not registered yet: block 1 was not cached when the engine scheduled this "
                                     "request (batch 3); it registered the block itself (BlockStored, batch 3)")


def test_ledger_flags_what_the_events_do_not_account_for():
    eng = Engine()
    eng.batch({"type": "AllBlocksCleared"}, eng.stored(tag_of("warm", 0), (), (A, B)))
    eng.batch(eng.stored(tag_of("warm", 1), (), (A,)), eng.stored(tag_of("warm", 1), (A,), (C,)))
    sent = [_sent("warm", 0, (A, B), 0.0, 0, 0), _sent("warm", 1, (A, C), 1.0, 8, 4),
            _sent("warm", 2, (A, B), 2.0, 8, 0)]  # no event for #2 at all
    c = reconcile(sent, eng.events(), BS)
    assert c[1].event_cached == 4 and not c[1].accounted and c[1].fact.startswith("not accounted")
    assert c[2].event_cached is None and not c[2].accounted and "no KV event" in c[2].fact


def test_hit_cap_and_duplicate_copies():
    """A prompt of exactly two blocks hits at most one (⌊(n−1)/B⌋); the engine recomputes and
    registers a second copy of its last block, whose removal leaves the first cached."""
    eng = Engine()
    t = [tag_of("warm", i) for i in range(3)]
    eng.batch({"type": "AllBlocksCleared"}, eng.stored(t[0], (), (A, B)))
    eng.batch(eng.stored(t[1], (), (A,)), eng.stored(t[1], (A,), (B,)), eng.removed(A, B))
    eng.batch(eng.stored(t[2], (), (A, B)))
    ab = tuple(x for b in (A, B) for x in b)
    sent = [Sent("warm", i, ab + ((99,) if i == 2 else ()), float(i), c, c) for i, c in enumerate((0, 4, 8))]
    assert [c.event_cached for c in reconcile(sent, eng.events(), BS)] == [0, 4, 8]


def test_engine_survival_measures_residency_and_reuse_gaps():
    eng = Engine()
    eng.batch({"type": "AllBlocksCleared"}, eng.stored(tag_of("warm", 0), (), (A, B)))   # ts 1000
    eng.batch(eng.stored(tag_of("warm", 1), (), (A,)))                                 # ts 1001: A reused
    eng.batch(eng.removed(A, B))                                                       # ts 1002: B evicted
    eng.batch(eng.stored(tag_of("warm", 2), (), (C,)))                                 # ts 1003
    s = engine_survival(eng.events(), BS, 10)
    res = s.residency[0]
    assert (res.capacity, res.capacity_blocks, res.stored_blocks, res.still_cached_blocks) == ("engine", 10, 3, 2)
    assert res.evicted_s.count == 1 and res.evicted_s.p50 == 2.0
    assert s.gaps[0].kind == "all" and s.gaps[0].gaps_s.count == 1 and s.gaps[0].gaps_s.max == 1.0
    one = s.residency[0].survival[0]  # t = 1 s: A and B observed ≥ 1 s, C not
    assert one.t_s == 1.0 and one.blocks == 2 and one.fraction == 1.0
    assert hash_blocks(A + B, BS)  # our hashing of the same tokens is what the ledger maps to


def test_a_malformed_endpoint_is_refused_before_anything_is_read(tmp_path):
    from prefixcache.replay import ReplayOptions, open_replay

    with pytest.raises(ConfigError, match="--kv-events 127.0.0.1:5557"):
        open_replay([str(tmp_path / "missing.jsonl")], ReplayOptions(server="http://127.0.0.1:9", kv_events="127.0.0.1:5557"))


def test_the_first_request_scheduled_after_a_reset_registers_what_the_model_gave_it():
    """After the pass's reset the engine schedules r1 first (sent second): it registers the shared
    prefix itself, in the batch that carries the reset, and r0 reuses it; our model, in send order,
    gave the prefix to r0's registration and a hit to r1."""
    eng = Engine()
    w = lambda i: tag_of("warm", i)  # noqa: E731
    eng.batch({"type": "AllBlocksCleared"}, eng.stored(w(1), (), (A, B)))
    eng.batch(eng.stored(w(0), (), (A, B)))
    sent = [_sent("warm", 0, (A, B), 0.0, 8, 0), _sent("warm", 1, (A, B), 0.1, 0, 8)]
    c = reconcile(sent, eng.events(), BS)
    assert [x.event_cached for x in c] == [8, 0] and all(x.accounted for x in c)
    assert c[0].fact.startswith("a concurrent request registered first: block 0 was registered by request warm #1")
    assert c[1].fact.startswith("not registered yet: block 0 was not cached when the engine scheduled this request "
                                "(batch 0); it registered the block itself (BlockStored, batch 0)")
