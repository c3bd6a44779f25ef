"""Replay passes: the same requests without cache (``cold``), with the KV prefix cache in
log order (``warm``), and canonicalized with the cache (``canonical``).

The runner talks to the engine through :class:`prefixcache.replay.local.engine.Engine`
only, so any engine that implements the protocol plugs in. Every cache pass starts from
an empty cache: a fresh analyzer ``BlockHashCache`` and the engine's KV store over it
(``engine.kv_store(index)``); the same prompts also go through the simulator
(:func:`prefixcache.analyzer.cache.simulate.simulator.simulate_stream`, ``--cache vllm``, same
block size, capacity and policy), and each result carries both counts. Requests
run in the one arrival order (:func:`prefixcache.analyzer.sequence.arrival_order`:
by logged timestamp, input order for ties or when a log has no times) and ``now`` is
its logical clock (logged seconds, else the position), so eviction decisions are
deterministic and comparable.

Verification recomputes a request cold and compares the first-token logits (max
|Δ|, argmax) and the greedy tokens. A cold pass that ran earlier in the same run
already holds that recomputation for the same token ids, so it is reused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.cache.index.eviction import POLICIES
from prefixcache.analyzer.cache.models import CacheSpec
from prefixcache.analyzer.cache.simulate.simulator import simulate_stream
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError, EngineError, InputError
from prefixcache.analyzer.replay_rows import LocalRow
from prefixcache.replay.local.engine import Engine, Generation, KVStore
from prefixcache.replay.options import PASSES, at_least_one, check_passes
from prefixcache.replay.prompts import Prompt
from prefixcache.replay.results import ResultWriter

VERIFY_MODES = ("none", "sample", "all")
#: Default tolerance on max |Δlogit| between a cache hit and its cold recomputation:
#: float32 measured ≤ 3.1e-5 on this project's samples. In half types a prefill split in
#: two is not bit-identical to one pass (other matmul shapes, other rounding): bfloat16
#: measured up to 0.75 on SmolLM2 (CPU), so the check there is looser (see ``_judge``).
DEFAULT_TOL = {"float32": 1e-3, "bfloat16": 1.0, "float16": 0.25}
HALF = ("bfloat16", "float16")
#: Cold logits kept for verification of later passes, at most (bytes).
REF_BUDGET_BYTES = 512 << 20


def sim_requests(prompts: Sequence[Prompt]) -> list[SimRequest]:
    """The prompts as the simulator's requests, in the same order and on the same clock."""
    return [SimRequest(order=i, session=p.session, index=p.request_index, source=p.source, record=p.record,
                       model=None, now=p.now, num_tokens=len(p.ids), tokens=p.ids) for i, p in enumerate(prompts)]


def predict(prompts: Sequence[Prompt], config: "ReplayConfig") -> list[int]:
    """The simulator's cached tokens for each prompt (``simulate --cache vllm`` with the
    same block size, capacity and policy as ``config``), in order."""
    spec = CacheSpec(cache="vllm", policy=config.policy, block_size=config.block_size)
    return [f.cached_tokens for f in simulate_stream(sim_requests(prompts), spec, config.capacity_blocks)]


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """Cache and verification settings shared by the passes.

    ``capacity_blocks`` bounds the KV cache (blocks of ``block_size`` tokens; None =
    unbounded; :func:`prefixcache.replay.local.session.capacity_blocks` turns a ``--capacity``
    into it). Built from :class:`~prefixcache.replay.options.ReplayOptions` by
    :func:`prefixcache.replay.local.session.replay_config`. ``policy``: the index's eviction policy. ``verify``:
    ``none``, ``sample`` (every ``verify_every``-th cache hit, starting with the
    first) or ``all`` (every hit). ``tol``: max |Δlogit| allowed (None = by dtype).
    ``repeat``: prefills timed per request (TTFT = their median). Raises ConfigError
    for unknown names, a pass listed twice and counts below 1, before any work is done.
    """

    passes: tuple[str, ...] = PASSES
    block_size: int = DEFAULT_BLOCK_SIZE
    capacity_blocks: int | None = None
    policy: str = "lru"
    max_new_tokens: int = 1
    verify: str = "sample"
    verify_every: int = 4
    tol: float | None = None
    repeat: int = 1

    def __post_init__(self) -> None:
        check_passes(self.passes)
        if self.verify not in VERIFY_MODES:
            raise ConfigError(f"--verify {self.verify}: choose from {', '.join(VERIFY_MODES)}")
        if self.policy not in POLICIES:
            raise ConfigError(f"--policy {self.policy}: the KV store's index evicts with one of {', '.join(POLICIES)}")
        at_least_one(("--max-new-tokens", self.max_new_tokens), ("--verify-every", self.verify_every),
                     ("--block-size", self.block_size), ("--capacity (blocks)", self.capacity_blocks),
                     ("--repeat", self.repeat))
        if self.tol is not None and not self.tol >= 0:
            raise ConfigError(f"--tol {self.tol}: must be ≥ 0")


def _digest(ids: Sequence[int]) -> bytes:
    return hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()


class Replay:
    """Runs the passes over ``prompts`` (``{"original": [...], "canonical": [...]}``) on any
    :class:`~prefixcache.replay.local.engine.Engine`.

    ``done`` are results of an earlier, interrupted run (``--resume``, read from the file
    named ``results_file``): cold requests already done are skipped; a cache pass replays
    its done requests again without recording them, to rebuild the same cache state.
    ``results`` grows as requests finish (each one also goes to the ``writer`` given to
    :meth:`run`), so an interrupted run keeps them. Raises ConfigError / InputError /
    EngineError for another run's results, missing prompts, or a prompt that is empty or
    longer than the engine's context, before any request runs.
    """

    def __init__(self, engine: Engine, config: ReplayConfig, prompts: dict[str, list[Prompt]],
                 done: Sequence[LocalRow] = (), run: str = "", results_file: str = "") -> None:
        self.engine, self.config, self.prompts, self.run_id = engine, config, prompts, run
        self.results_file = results_file or "the results file"
        self.writer = ResultWriter(None, LocalRow)
        self.results: list[LocalRow] = list(done)
        self._done = {(r.pass_name, r.position): r for r in done}
        self._refs: dict[bytes, Generation] = {}
        self._ref_bytes = 0
        self.dtype = engine.dtype
        self.tol = config.tol if config.tol is not None else DEFAULT_TOL.get(self.dtype, 1e-3)
        self._check()

    def _check(self) -> None:
        other = sorted({r.run or "(none)" for r in self._done.values() if r.run != self.run_id})
        if other:
            raise ConfigError(f"--resume: {self.results_file} holds results of another run "
                              f"(run {', '.join(other)}; this run is {self.run_id}): model, dtype, device, block size, "
                              "capacity, policy, template, tokenizer, --max-prompt-tokens or --max-new-tokens "
                              "differ; rerun with the same settings, or write to another --out")
        for name in self.config.passes:
            source = self.prompts.get("canonical" if name == "canonical" else "original")
            if source is None:
                raise ConfigError(f"pass {name}: no prompts were prepared for it")
            for pos, p in enumerate(source):
                if len(p.ids) + self.config.max_new_tokens > self.engine.max_context:
                    raise EngineError(f"{p.source}:{p.record}: prompt of {len(p.ids)} tokens exceeds the model's "
                                      f"context of {self.engine.max_context} tokens (use --max-prompt-tokens)")
                if not p.ids:
                    raise InputError("request renders to an empty prompt", p.source, p.record)
                old = self._done.get((name, pos))
                if old is not None and old.prompt_tokens != len(p.ids):
                    raise InputError(f"--resume: results are from a different run ({name} #{pos} had "
                                     f"{old.prompt_tokens} tokens, now {len(p.ids)})", self.results_file)

    def total(self) -> int:
        """Requests to run in all passes (including rebuilds of resumed cache passes)."""
        n = 0
        for name in self.config.passes:
            count = len(self.prompts["canonical" if name == "canonical" else "original"])
            n += count - (sum(1 for (p, _) in self._done if p == name) if name == "cold" else 0)
        return n

    def warmup(self) -> None:
        """One short forward pass so the first timed request does not pay one-time setup."""
        first = next(iter(self.prompts.get("original") or self.prompts.get("canonical") or []), None)
        if first is not None:
            self.engine.generate(first.ids[:32], max_new_tokens=1)

    def run(self, on_request: Callable[[str, LocalRow | None], None] | None = None,
            writer: ResultWriter | None = None) -> list[LocalRow]:
        """Run every pass; each new result also goes to ``writer``; ``on_request(pass,
        result)`` after each request (result None for a replayed, already recorded one).
        Returns all results."""
        if writer is not None:
            self.writer = writer
        for name in self.config.passes:
            self._run_pass(name, on_request)
        return self.results

    def _run_pass(self, name: str, on_request: Callable | None) -> None:
        prompts = self.prompts["canonical" if name == "canonical" else "original"]
        cap = self.config.capacity_blocks
        cache: KVStore | None = None
        predicted: list[int | None] = [None] * len(prompts)
        if name != "cold":
            cache = self.engine.kv_store(BlockHashCache(self.config.block_size, cap, self.config.policy))
            predicted = list(predict(prompts, self.config))
        hits = 0
        for pos, p in enumerate(prompts):
            old = self._done.get((name, pos))
            if old is not None and cache is None:
                continue
            gen = self.engine.generate(p.ids, max_new_tokens=self.config.max_new_tokens, cache=cache, now=p.now,
                                       repeat=1 if old is not None else self.config.repeat)
            hits += gen.cached_tokens > 0
            if old is not None:  # resumed: replayed only to rebuild the cache state
                if on_request:
                    on_request(name, None)
                continue
            if name == "cold":
                self._remember(p.ids, gen)
            check = None
            if gen.cached_tokens > 0 and self._sampled(hits):
                check = self._verify(p.ids, gen)
            result = self._result(name, pos, p, gen, predicted[pos], check)
            self.results.append(result)
            self.writer.write(result)
            if on_request:
                on_request(name, result)

    def _sampled(self, hit_number: int) -> bool:
        """``--verify``: all hits, every ``verify_every``-th hit from the first, or none."""
        mode = self.config.verify
        return mode == "all" or (mode == "sample" and (hit_number - 1) % self.config.verify_every == 0)

    def _remember(self, ids: Sequence[int], gen: Generation) -> None:
        if self._ref_bytes + gen.first_logits.nbytes <= REF_BUDGET_BYTES and self.config.passes[-1] != "cold":
            self._refs[_digest(ids)] = gen
            self._ref_bytes += gen.first_logits.nbytes

    def _verify(self, ids: Sequence[int], gen: Generation) -> tuple[float, bool, bool, bool]:
        """(max |Δlogit|, argmax equal, greedy tokens equal, verdict) against a cold computation."""
        ref = self._refs.get(_digest(ids))
        if ref is None:
            ref = self.engine.generate(ids, max_new_tokens=self.config.max_new_tokens)
        delta = float(np.max(np.abs(gen.first_logits - ref.first_logits)))
        top_gen, top_ref = int(np.argmax(gen.first_logits)), int(np.argmax(ref.first_logits))
        same_tokens = gen.output_ids == ref.output_ids
        return delta, top_gen == top_ref, same_tokens, self._judge(delta, ref.first_logits, top_gen, top_ref, same_tokens)

    def _judge(self, delta: float, ref: np.ndarray, top_gen: int, top_ref: int, same_tokens: bool) -> bool:
        """float32: identical argmax and greedy tokens, and max |Δ| ≤ tol. Half types: max |Δ| ≤ tol,
        and an argmax flip only counts when the cold top-1 beats the token chosen by more than
        2·max |Δ| (a flip rounding cannot explain); greedy continuations are reported, not judged."""
        if delta > self.tol:
            return False
        if self.dtype not in HALF:
            return top_gen == top_ref and same_tokens
        return top_gen == top_ref or float(ref[top_ref] - ref[top_gen]) <= 2 * delta

    def _result(self, name: str, pos: int, p: Prompt, gen: Generation, predicted: int | None,
                check: tuple[float, bool, bool, bool] | None) -> LocalRow:
        delta, argmax_ok, tokens_ok, ok = check if check else (None, None, None, None)
        return LocalRow(
            pass_name=name, position=pos, session=p.session, request_index=p.request_index,
            source=p.source, record=p.record, prompt_tokens=gen.prompt_tokens, original_tokens=p.original_tokens,
            cached_tokens=gen.cached_tokens, predicted_cached=predicted, computed_tokens=gen.computed_tokens,
            t_start=gen.t_start, t_prefill_start=gen.t_prefill_start, t_first_token=gen.t_first_token,
            t_end=gen.t_end, store_s=gen.store_s, kv_bytes=gen.kv_bytes, output_ids=gen.output_ids,
            max_abs_dlogit=delta, argmax_match=argmax_ok, tokens_match=tokens_ok, verify_ok=ok,
            run=self.run_id, ttft_samples=gen.ttft_samples,
        )
