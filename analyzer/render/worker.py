"""Template renders in a worker process: time and memory bounds that a C-level loop cannot escape.

The sandbox (:mod:`.sandbox`) checks what jinja lets it see: operators, calls, output chunks.
A single C call it cannot see into (``'{:>{}}'.format('x', 10**8)``, a ``sort`` of a huge
list, ``json.dumps`` of a value nested into itself) can still take gigabytes or minutes.
So every render runs in one long-lived worker, forked from this process at the first render
(so it shares the loaded modules and pays no import), which:

* runs under an address-space limit (``RLIMIT_AS``) of what it holds when it starts plus
  ``RENDER_MAX_MEMORY`` (1 GiB, ``PREFIXCACHE_RENDER_MAX_MEMORY``): an allocation past it fails
  in the worker (a ``MemoryError``, or the worker dies), never in this process;
* is given ``RENDER_TIMEOUT`` (10 s, ``PREFIXCACHE_RENDER_TIMEOUT``) by the caller, which waits
  for the answer that long plus one second and then kills the worker (``SIGKILL``): a render
  stuck in C ends there too.

Either way the caller gets one :class:`~.sandbox.RenderLimitError` naming the limit, and the
next render starts a fresh worker. The worker is handed a module-level function and its
(picklable) arguments; the function's result or exception comes back as it is. Without
``os.fork`` (not Linux or macOS) renders run in this process, with the sandbox's own bounds.
"""

from __future__ import annotations

import atexit
import os
import pickle
import resource
import signal
import threading
import time
from typing import Any, Callable

from prefixcache.analyzer import limits
from prefixcache.analyzer.limits import LIMITS
from prefixcache.analyzer.render.sandbox import RenderLimitError

#: Seconds the caller waits past the render timeout before it kills the worker.
GRACE_S = 1.0
#: Environment variables the worker takes from the caller at every render (tests and users change them).
_SHARED_ENV = tuple(lim.env for lim in LIMITS.values())


def _address_space() -> int:
    """Bytes of address space this process holds now (``/proc/self/statm``; 0 when unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _serve(conn: Any, extra: int, theirs: Any) -> None:
    """The worker's loop: cap the address space, then answer ``(fn, args, env)`` messages until the
    caller's end of the pipe closes (``theirs``, inherited through the fork, is closed here first, so
    a caller that dies, even by ``SIGKILL``, ends the worker at once)."""
    theirs.close()
    _drop_inherited_fds(conn.fileno())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    threading.Thread(target=_orphan_watch, args=(os.getppid(),), daemon=True).start()
    held = _address_space()
    if held:
        cap = held + extra
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
        except (ValueError, OSError):  # a lower hard limit set from outside: keep it
            pass
    while True:
        try:
            fn, args, env = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        for key in _SHARED_ENV:
            if env.get(key) is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = env[key]
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except MemoryError:
            reply = ("err", RenderLimitError(_memory_message()))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
            reply = ("err", exc)
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            data = pickle.dumps(("err", RenderLimitError(_memory_message())))
        except Exception as exc:  # noqa: BLE001 - an exception that does not pickle
            data = pickle.dumps(("err", RenderLimitError(f"rendering failed: {type(exc).__name__}: {reply[1]}")))
        try:
            conn.send_bytes(data)
        except MemoryError:
            conn.send_bytes(pickle.dumps(("err", RenderLimitError(_memory_message()))))
        del reply, data


def _drop_inherited_fds(keep: int) -> None:
    """In the worker: close every descriptor inherited through the fork but the pipe ``keep`` and
    stderr, and point stdin and stdout at ``/dev/null``. Otherwise the worker would hold open the
    pipes the caller has to its own children (a browser driver, a server) and to whoever reads its
    output, and they would wait for an end of file that never comes."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        inherited = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        inherited = list(range(3, 1024))
    for fd in inherited:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _orphan_watch(parent: int) -> None:
    """In the worker: end it once the caller is gone, even in the middle of a long compile or render."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def _memory_message() -> str:
    return (f"template needs more than {limits.value('RENDER_MAX_MEMORY'):,} bytes of memory "
            "(PREFIXCACHE_RENDER_MAX_MEMORY); the render worker was stopped")


class _Worker:
    """One forked worker and the pipe to it."""

    def __init__(self, extra: int) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.extra = extra
        self.conn, child = ctx.Pipe()
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")  # no "forked after parallelism" warning
        self.proc = ctx.Process(target=_serve, args=(child, extra, self.conn), daemon=True, name="prefixcache-render")
        self.proc.start()
        child.close()

    def kill(self) -> None:
        try:
            self.conn.close()
        finally:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)


_WORKER: list[_Worker] = []


def _worker() -> _Worker:
    extra = limits.value("RENDER_MAX_MEMORY")
    if _WORKER and (_WORKER[0].extra != extra or not _WORKER[0].proc.is_alive()):
        _stop()
    if not _WORKER:
        _WORKER.append(_Worker(extra))
    return _WORKER[0]


def _stop() -> None:
    while _WORKER:
        _WORKER.pop().kill()


atexit.register(_stop)


def cpu_seconds() -> float:
    """CPU seconds (user + system) the live render worker has used (``/proc/PID/stat``; 0.0 without a
    worker or off Linux). A worker is a long-lived child, so ``RUSAGE_CHILDREN`` misses it and
    ``time.process_time`` counts only the caller: a CPU figure of a render-heavy run adds this."""
    if not _WORKER or not _WORKER[0].proc.is_alive():
        return 0.0
    try:
        with open(f"/proc/{_WORKER[0].proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def run(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in the render worker: its result, or the exception it raised.

    ``fn`` must be a module-level function and ``args`` picklable. Raises
    :class:`RenderLimitError` when the worker does not answer within the render timeout
    (plus :data:`GRACE_S`; it is killed) or dies (memory past ``RENDER_MAX_MEMORY``).
    Runs ``fn`` in this process where there is no ``fork``, or inside a worker already. Thread-safe
    (one render at a time goes through the pipe).
    """
    if not hasattr(os, "fork") or _IN_WORKER:
        return fn(*args)
    with _LOCK:  # one pipe, one render at a time
        return _run(fn, args)


_LOCK = threading.Lock()


def _run(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    timeout = limits.seconds("RENDER_TIMEOUT")
    env = {key: os.environ.get(key) for key in _SHARED_ENV}
    w = _worker()
    try:
        w.conn.send((fn, args, env))
    except (BrokenPipeError, EOFError, OSError):
        _stop()
        w = _worker()
        w.conn.send((fn, args, env))
    if not w.conn.poll(timeout + GRACE_S):
        _stop()
        raise RenderLimitError(f"rendering took longer than {timeout:g} s (PREFIXCACHE_RENDER_TIMEOUT)")
    try:
        status, value = pickle.loads(w.conn.recv_bytes())
    except (EOFError, OSError):
        _stop()
        raise RenderLimitError(_memory_message()) from None
    if status == "err":
        raise value
    return value


_IN_WORKER = False


def _mark_worker() -> None:
    global _IN_WORKER
    _IN_WORKER = True
    _WORKER.clear()  # the parent's worker handle is not this process's


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_worker)
