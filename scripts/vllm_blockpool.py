"""Drive vLLM's own ``BlockPool`` offline over a block-hash trace; print each request's hit tokens.

Runs in the engine venv (``.venv-vllm/bin/python scripts/vllm_blockpool.py TRACE --capacity-blocks N[,N…]``),
never in the project's: it imports ``vllm.v1.core.block_pool`` and does, request by request in arrival
order (logged ``timestamp``, stable), what vLLM v1's scheduler and ``KVCacheManager`` do for a
prompt-only request with prefix caching on:

1. the longest run of leading cached blocks, at most ⌊(n−1)/B⌋ (the last prompt token is always
   computed), each looked up with ``BlockPool.get_cached_block``;
2. ``touch`` those blocks (out of the free queue), then ``get_new_blocks`` for the rest of the prompt's
   ⌈n/B⌉ blocks (evicting from the free queue's head, uncached blocks first);
3. ``cache_full_blocks`` for the ⌊n/B⌋ full blocks: a last, partial block gets no hash;
4. ``free_blocks`` in reverse order (vLLM frees a finished request's blocks tail first).

The pool has ``--capacity-blocks`` + 1 blocks (vLLM keeps block 0 as the null block); several
capacities (comma-separated) run one after another in one process (importing vLLM once takes
most of the time). Output: one JSON line per request and capacity, ``{"capacity": C, "record": N,
"cached_tokens": K}`` (``record``: 1-based line of the trace), and a request that needs more
blocks than the pool has is ``{"capacity": C, "record": N, "skipped": "..."}``.
The trace's ids become 8-byte ``BlockHash`` values; the trace's hash ids already chain (Mooncake: an id
names a block and everything before it), so no parent hash is mixed in.
"""

from __future__ import annotations

import argparse
import json
import sys
from types import SimpleNamespace


def main(argv: list[str]) -> int:
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.kv_cache_utils import BlockHash

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--capacity-blocks", required=True, help="one or more capacities, comma-separated")
    ap.add_argument("--block-size", type=int, default=512)
    args = ap.parse_args(argv)
    bs = args.block_size
    with open(args.trace, encoding="utf-8") as f:
        recs = [(i + 1, json.loads(line)) for i, line in enumerate(f) if line.strip()]
    recs.sort(key=lambda x: x[1].get("timestamp", 0))
    for capacity in (int(c) for c in args.capacity_blocks.split(",")):
        run(BlockPool(capacity + 1, True, bs), BlockHash, recs, bs, capacity, sys.stdout)
    return 0


def run(pool, BlockHash, recs, bs: int, capacity: int, out) -> None:
    """One capacity: every request in order, one output line each."""
    for record, r in recs:
        n = int(r["input_length"])
        hashes = [BlockHash(int(h).to_bytes(8, "little", signed=True)) for h in r["hash_ids"]]
        full = min(len(hashes), n // bs)
        hits = []
        for h in hashes[:min(len(hashes), (n - 1) // bs)]:
            got = pool.get_cached_block(h, [0])
            if got is None:
                break
            hits.append(got[0])
        need = -(-n // bs) - len(hits)
        pool.touch(hits)
        if need > pool.get_num_free_blocks():
            pool.free_blocks(reversed(hits))
            out.write(json.dumps({"capacity": capacity, "record": record, "skipped": f"needs {need} blocks"}) + "\n")
            continue
        blocks = hits + pool.get_new_blocks(need)
        pool.cache_full_blocks(SimpleNamespace(block_hashes=hashes[:full]), blocks, len(hits), full, bs, 0)
        pool.free_blocks(reversed(blocks))
        out.write(json.dumps({"capacity": capacity, "record": record, "cached_tokens": len(hits) * bs}) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
