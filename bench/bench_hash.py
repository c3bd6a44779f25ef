"""Block-hash speed: our chained XXH3 hashing vs vLLM's default (SHA-256 over pickled tuples).

vLLM v1 hashes each full block as ``sha256(pickle.dumps((parent, tuple(tokens),
extra_keys), HIGHEST_PROTOCOL))`` (``--prefix-caching-hash-algo sha256``, the
default; ~100–200 ns per token per the vLLM V1 blog). Ours must be at least as
fast. Prints CPU ns per token for both on 200k tokens (median of 5 interleaved pairs, bench/timing.py)
and the ratio.

    .venv/bin/python bench/bench_hash.py
"""

from __future__ import annotations

import hashlib
import pickle
import random

from timing import interleaved

from prefixcache.analyzer.cache.index.block_hash import hash_blocks

N_TOKENS = 200_000
BLOCK = 16


def vllm_sha256(tokens: list[int], block: int) -> list[bytes]:
    """vLLM's default chained block hash (semantics of ``hash_block_tokens``)."""
    parent = hashlib.sha256(pickle.dumps("vllm-none-hash", pickle.HIGHEST_PROTOCOL)).digest()
    out = []
    for i in range(0, len(tokens) // block * block, block):
        parent = hashlib.sha256(pickle.dumps((parent, tuple(tokens[i:i + block]), None),
                                             pickle.HIGHEST_PROTOCOL)).digest()
        out.append(parent)
    return out


def main() -> int:
    rng = random.Random(0)
    tokens = [rng.randrange(150_000) for _ in range(N_TOKENS)]
    t, _ = interleaved({"ours": lambda: hash_blocks(tokens, BLOCK), "vllm": lambda: vllm_sha256(tokens, BLOCK)}, 5)
    ours, theirs = (t[k] / len(tokens) * 1e9 for k in ("ours", "vllm"))
    print(f"{N_TOKENS:,} tokens, block size {BLOCK}")
    print(f"vLLM default (sha256 over pickle):  {theirs:6.1f} ns/token CPU")
    print(f"prefixcache (xxh3-64, packed int64): {ours:6.1f} ns/token CPU")
    print(f"speed-up: {theirs / ours:.1f}× (goal ≥ 1.0×)")
    return 0 if ours <= theirs else 1


if __name__ == "__main__":
    raise SystemExit(main())
