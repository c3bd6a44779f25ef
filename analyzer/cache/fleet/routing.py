"""Routing policies of a fleet simulation: which replica serves each request.

``--router`` names (``NAME[:PARAM]``), each with its source:

* ``round-robin`` — request *i* goes to replica *i* mod N (vLLM production stack's and
  Dynamo's default; SGLang router ``round_robin``);
* ``random`` — uniform, seeded (SGLang router ``random``);
* ``least-loaded`` — fewest requests in flight, ties in rotation (SGLang
  ``shortest_queue``; llm-d's load-aware scorer alone);
* ``session`` — sticky by the request's session (``prompt_cache_key`` / user / session
  id, as the ingest set it): a new session goes to the least-loaded replica (llm-d
  session-affinity scorer; Dynamo sticky sessions);
* ``session-per-router[:R]`` — R router replicas (default 2) behind round-robin, each
  with its own sticky table, so one session lands on up to R replicas
  (ai-dynamo/dynamo#11035);
* ``prefix-hash[:K]`` — consistent hashing (100 virtual nodes a replica) of the chained
  hash of the first K blocks (default 4; shorter prompts: all their blocks);
* ``cache-aware`` — SGLang's router (``sgl-router`` cache_aware policy): an approximate
  prefix tree per worker built from the requests routed there (never told of
  evictions; its own size-based pruning, ``--max-tree-size``, is not modelled); if the
  load is imbalanced (max − min > 32 and max > 1.0001 × min requests in flight, the
  router's ``--balance-abs-threshold`` / ``--balance-rel-threshold``), the
  least-loaded worker; else, when the best match covers ≥ 0.5 of the prompt
  (``--cache-threshold``), that worker; else the worker with the smallest tree;
* ``kv-cost`` — Dynamo's KV router cost (``--router-kv-overlap-score-weight`` 1,
  temperature 0): cost = weight × (active prefill blocks + request blocks − overlap
  blocks) + (active decode blocks + request blocks), lowest cost wins; overlap is
  exact (Dynamo's KV events), device tier only;
* ``oracle`` — best routing in hindsight. Routed here (greedy): each request to the
  replica holding the longest prefix of it now (GPU and lower tiers), ties to the
  least loaded. Greedy is not optimal over a run (sending a whole workload after its
  shared system prompt to one replica can thrash it while others idle), so the fleet
  study reports as ``oracle`` the best whole run among this greedy routing and every
  other router of the study (:func:`~.fleet.study.fleet_report`): by construction
  it is ≥ every policy listed with it.

Ties (least-loaded, oracle) are broken by the lowest replica index after the
rotation (so idle replicas fill in turn); kv-cost ties go to the lowest index.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar, Sequence

from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError


@dataclass(frozen=True, slots=True)
class View:
    """What a router may look at for one request: the request's block chain in blocks of
    ``block_size`` tokens, requests in flight per replica, the tokens each replica holds of the
    prompt (exact probe: GPU; with lower tiers), and Dynamo's block loads (callables)."""

    chain: tuple[int, ...]
    block_size: int
    loads: Sequence[int]
    held_gpu: Sequence[int]
    held_all: Sequence[int]
    active_blocks: Callable[[int], int]
    prefill_blocks: Callable[[int], int]


class Router(ABC):
    """One routing policy over ``n`` replicas; :meth:`pick` then :meth:`routed`."""

    name: ClassVar[str] = ""
    default_param: ClassVar[int | None] = None
    #: Whether :meth:`pick` reads ``View.loads`` (the fleet skips the load upkeep if not).
    uses_load: ClassVar[bool] = True

    def __init__(self, n: int, param: int | None = None, seed: int = 0) -> None:
        self.n, self.param, self.rng = n, param if param is not None else self.default_param, random.Random(seed)
        self._turn = 0

    @abstractmethod
    def pick(self, r: SimRequest, v: View) -> int:
        """The replica (0 … n−1) that ``r`` goes to, given the fleet's state ``v``."""

    def routed(self, r: SimRequest, v: View, w: int) -> None:
        """Record that ``r`` went to replica ``w`` (routers that keep state)."""

    def _least(self, loads: Sequence[int], among: Sequence[int] | None = None) -> int:
        """Least-loaded replica of ``among`` (default all), ties in rotation."""
        cand = list(range(self.n)) if among is None else list(among)
        best = min(loads[w] for w in cand)
        ties = [w for w in cand if loads[w] == best]
        w = min(ties, key=lambda t: (t - self._turn) % self.n)
        self._turn = (w + 1) % self.n
        return w


ROUTERS: dict[str, type[Router]] = {}


def _register(cls: type[Router]) -> type[Router]:
    ROUTERS[cls.name] = cls
    return cls


@_register
class RoundRobin(Router):
    name = "round-robin"
    uses_load = False

    def pick(self, r: SimRequest, v: View) -> int:
        w, self._turn = self._turn, (self._turn + 1) % self.n
        return w


@_register
class RandomRouter(Router):
    name = "random"
    uses_load = False

    def pick(self, r: SimRequest, v: View) -> int:
        return self.rng.randrange(self.n)


@_register
class LeastLoaded(Router):
    name = "least-loaded"

    def pick(self, r: SimRequest, v: View) -> int:
        return self._least(v.loads)


@_register
class Session(Router):
    name = "session"

    def __init__(self, n: int, param: int | None = None, seed: int = 0) -> None:
        super().__init__(n, param, seed)
        self.tables: list[dict[str, int]] = [{}]
        self._front = 0

    def _table(self) -> dict[str, int]:
        return self.tables[0]

    def pick(self, r: SimRequest, v: View) -> int:
        table = self._table()
        if r.session not in table:
            table[r.session] = self._least(v.loads)
        return table[r.session]


@_register
class SessionPerRouter(Session):
    name = "session-per-router"
    default_param = 2

    def __init__(self, n: int, param: int | None = None, seed: int = 0) -> None:
        super().__init__(n, param, seed)
        self.tables = [{} for _ in range(max(1, self.param or 1))]

    def _table(self) -> dict[str, int]:
        t, self._front = self.tables[self._front], (self._front + 1) % len(self.tables)
        return t


def _h64(x: str) -> int:
    return int.from_bytes(hashlib.blake2b(x.encode(), digest_size=8).digest(), "big")


@_register
class PrefixHash(Router):
    name = "prefix-hash"
    uses_load = False
    default_param = 4

    def __init__(self, n: int, param: int | None = None, seed: int = 0) -> None:
        super().__init__(n, param, seed)
        ring = sorted((_h64(f"replica-{w}-{k}"), w) for w in range(n) for k in range(100))
        self._keys, self._owners = [k for k, _ in ring], [w for _, w in ring]

    def pick(self, r: SimRequest, v: View) -> int:
        k = min(len(v.chain), max(1, self.param or 1))
        key = _h64(f"{v.chain[k - 1]}") if k else _h64(f"session-{r.session}")
        i = bisect.bisect(self._keys, key) % len(self._keys)
        return self._owners[i]


@_register
class CacheAware(Router):
    name = "cache-aware"
    CACHE_THRESHOLD, ABS_THRESHOLD, REL_THRESHOLD = 0.5, 32, 1.0001

    def __init__(self, n: int, param: int | None = None, seed: int = 0) -> None:
        super().__init__(n, param, seed)
        self.trees: list[set[int]] = [set() for _ in range(n)]

    def pick(self, r: SimRequest, v: View) -> int:
        lo, hi = min(v.loads), max(v.loads)
        if hi - lo > self.ABS_THRESHOLD and hi > self.REL_THRESHOLD * lo:
            return self._least(v.loads)
        best_w, best_k = 0, -1
        for w, tree in enumerate(self.trees):
            k = 0
            while k < len(v.chain) and v.chain[k] in tree:
                k += 1
            if k > best_k:
                best_w, best_k = w, k
        if v.chain and best_k / len(v.chain) >= self.CACHE_THRESHOLD:
            return best_w
        return min(range(self.n), key=lambda w: (len(self.trees[w]), (w - self._turn) % self.n))

    def routed(self, r: SimRequest, v: View, w: int) -> None:
        self.trees[w].update(v.chain)
        self._turn = (w + 1) % self.n


@_register
class KvCost(Router):
    name = "kv-cost"
    OVERLAP_WEIGHT = 1.0

    def pick(self, r: SimRequest, v: View) -> int:
        n_blocks = len(v.chain)

        def cost(w: int) -> float:
            overlap = v.held_gpu[w] // v.block_size
            prefill = v.prefill_blocks(w) + max(0, n_blocks - overlap)
            return self.OVERLAP_WEIGHT * prefill + v.active_blocks(w) + n_blocks

        return min(range(self.n), key=lambda w: (cost(w), w))


@_register
class Oracle(Router):
    name = "oracle"

    def pick(self, r: SimRequest, v: View) -> int:
        best = max(v.held_all)
        return self._least(v.loads, [w for w in range(self.n) if v.held_all[w] == best])


def parse_routers(text: str) -> tuple[tuple[str, int | None], ...]:
    """``--router`` as ``(name, param)`` pairs; ConfigError for an unknown name or a bad
    parameter (a whole number ≥ 1 after ``:``)."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, _, param = item.partition(":")
        if name not in ROUTERS:
            raise ConfigError(f"unknown --router {name!r}; choose from {', '.join(ROUTERS)}")
        if param and (not param.isdigit() or int(param) < 1):
            raise ConfigError(f"--router {item}: the parameter after ':' must be a whole number ≥ 1")
        if param and ROUTERS[name].default_param is None:
            raise ConfigError(f"--router {name} takes no parameter")
        out.append((name, int(param) if param else None))
    if not out:
        raise ConfigError(f"--router: empty; choose from {', '.join(ROUTERS)}")
    return tuple(dict.fromkeys(out))


def make_router(name: str, param: int | None, n: int, seed: int = 0) -> Router:
    """A fresh router of ``name`` over ``n`` replicas."""
    return ROUTERS[name](n, param, seed)
