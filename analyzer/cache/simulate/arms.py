"""Run a study's independent arms in parallel: ``simulate --executor ray[:ADDRESS]``.

An *arm* is one independent replay of the same request stream: a policy (with its TTL) at one
capacity, or one swept policy at every capacity (:func:`~.sweeps.swept_totals`), or one router of
a fleet. Arms share everything they read — the simulator requests (arrival order), the baseline,
lint's drift causes, the block chains — and change none of it, so they may run anywhere, in any
order, and their results, put back in the arms' order, are the serial run's.

:func:`map_arms` runs ``fn(shared, arm)`` for each arm: with ``--executor local`` (the default)
here, one after the other; with ``ray`` / ``ray:ADDRESS`` (:func:`~prefixcache.analyzer.prepare.
parallel.parse_executor`) as one Ray task per arm (one CPU each), where ``shared`` is put in Ray's
object store **once** (one serialized copy: the requests' ids are compact arrays, ``array('q')`` /
numpy, so the copy is their bytes plus one small record per request) and each worker process
deserializes it once, on its first task, and keeps it for the next ones. ``fn`` must be a
module-level function of the installed package (a task names it, it is not shipped as code): a
cluster's nodes need the same ``prefixcache[ray]`` installed (docs/commands/simulate.md).

The arm functions of ``simulate``'s policy × capacity grid are here too (:func:`run_grid_arm`); the fleet's router arm is :func:`~..fleet.study.router_arm`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypeVar

from prefixcache.analyzer.cache.models import CacheSpec
from prefixcache.analyzer.cache.simulate.document import ResultRow, offline_bound, result_row, totals_row
from prefixcache.analyzer.cache.simulate.simulator import Baseline, iter_stream, simulate_stream
from prefixcache.analyzer.cache.simulate.sweeps import swept_totals
from prefixcache.analyzer.cache.workload import SimRequest

S = TypeVar("S")
A = TypeVar("A")
R = TypeVar("R")

#: The shared object a worker process holds: ``(object ref hex, value)`` of the latest one it read.
_HELD: list[Any] = [None, None]


def map_arms(fn: Callable[[S, A], R], shared: S, arms: Sequence[A], executor: str = "local") -> list[R]:
    """``[fn(shared, arm) for arm in arms]``, computed here (``executor`` ``local``) or as Ray tasks
    (``ray``, ``ray:ADDRESS``; see the module docstring), in the arms' order either way. An
    exception of an arm is raised here, the first arm's first. Raises ConfigError for a bad
    ``executor`` or when Ray is not installed. One arm runs here even with Ray (nothing to spread)."""
    from prefixcache.analyzer.prepare.parallel import connect, parse_executor

    ex = parse_executor(executor)
    if not ex.parallel or len(arms) < 2:
        return [fn(shared, arm) for arm in arms]
    import ray

    started = connect(ex)
    try:
        ref = ray.put(shared)
        task = ray.remote(num_cpus=1, max_retries=0)(_run_arm)
        futures = [task.remote(fn, [ref], arm) for arm in arms]  # the ref inside a list: not resolved per task
        out = ray.get(futures)
    finally:
        if started:
            ray.shutdown()
    for res in out:
        if isinstance(res, _Raised):
            raise res.rebuilt()  # the arm's own error (ConfigError, InputError), its one line, not Ray's wrapper
    return out


@dataclass(frozen=True, slots=True)
class _Raised:
    """A :class:`~prefixcache.analyzer.errors.PrefixcacheError` an arm raised on a worker, sent back as a value:
    its class, message (``str``) and attributes (an InputError's source, record, field)."""

    kind: type
    message: str
    attrs: dict

    def rebuilt(self) -> Exception:
        """The same error, here: same class, same ``str``, same attributes."""
        err = self.kind.__new__(self.kind)
        Exception.__init__(err, self.message)
        err.__dict__.update(self.attrs)
        return err


def _run_arm(fn: Callable[[Any, Any], Any], ref: list, arm: Any) -> Any:
    """A Ray task's body: ``fn(shared, arm)`` with ``shared`` read from the object store once per worker."""
    import ray

    from prefixcache.analyzer.errors import PrefixcacheError

    key = ref[0].hex()
    if _HELD[0] != key:
        _HELD[0], _HELD[1] = None, None  # the previous study's copy goes before the next is read
        _HELD[1] = ray.get(ref[0])
        _HELD[0] = key
    try:
        return fn(_HELD[1], arm)
    except PrefixcacheError as exc:
        return _Raised(type(exc), str(exc), dict(vars(exc)))


@dataclass(frozen=True, slots=True)
class GridShared:
    """What every arm of a ``simulate`` grid reads: the simulator requests (arrival order), the
    baseline, drift causes (request order → rule code), the block chains of the swept policies (None
    when no arm sweeps), the capacities as ``(label, blocks or None)``, block size (tokens), KV bytes
    per token (None: no byte capacities) and the cache's name."""

    reqs: Sequence[SimRequest]
    base: Baseline
    causes: Mapping[int, str]
    ch: list | None
    caps: Sequence[tuple[str, int | None]]
    block_size: int
    bpt: int | None
    cache: str


@dataclass(frozen=True, slots=True)
class GridArm:
    """One arm of the grid: ``spec`` (its policy and TTL set), ``ttl_shown`` (the TTL its rows name,
    seconds or None), ``cap`` the index of its capacity in :attr:`GridShared.caps` (None: a swept
    policy, every capacity in one pass), ``rows``: whether its per-request figures come back."""

    spec: CacheSpec
    ttl_shown: float | None
    cap: int | None
    rows: bool


def run_grid_arm(sh: GridShared, arm: GridArm) -> tuple[list[ResultRow], list | None]:
    """One arm of a ``simulate`` grid: :func:`swept_arm` when ``arm.cap`` is None, else :func:`stream_arm`."""
    return swept_arm(sh, arm) if arm.cap is None else stream_arm(sh, arm)


def swept_arm(sh: GridShared, arm: GridArm) -> tuple[list[ResultRow], list | None]:
    """A swept policy (LRU stack sweep or Belady) at every capacity: its result rows, and its first
    capacity's per-request figures when ``arm.rows`` (else None)."""
    blocks = [b for _, b in sh.caps]
    tots, rows = swept_totals(sh.reqs, arm.spec, blocks, sh.base, sh.causes, rows=arm.rows, ch=sh.ch)
    out = []
    for (text, b), (t, run) in zip(sh.caps, tots):
        bound = None if run is None else offline_bound(t.prompt_tokens, t.blocks_total, run[1], run[2], run[0])
        out.append(totals_row(sh.cache, arm.spec.policy, arm.ttl_shown, text, b, sh.block_size, sh.bpt, t, bound))
    return out, rows


def stream_arm(sh: GridShared, arm: GridArm) -> tuple[list[ResultRow], list | None]:
    """A policy replayed at one capacity (:func:`~.simulator.simulate_stream`): its one result row,
    and its per-request figures when ``arm.rows`` (else None)."""
    text, b = sh.caps[arm.cap]
    # aggregates: an arm whose rows are not read sums them as they are stepped (no row kept)
    rows = (simulate_stream if arm.rows else iter_stream)(sh.reqs, arm.spec, b, sh.base, sh.causes)
    return [result_row(sh.cache, arm.spec.policy, arm.ttl_shown, text, b, sh.block_size, sh.bpt, rows)], \
        rows if arm.rows else None
