"""Replay through a real engine with a KV prefix cache: :func:`open_replay` runs in-process or through ``--server``. Imports analyzer, never cli.

Layers (``tests/test_layout.py``): the shared base — :mod:`~prefixcache.replay.options`,
:mod:`~prefixcache.replay.document`, :mod:`~prefixcache.replay.prompts`,
:mod:`~prefixcache.replay.context`, :mod:`~prefixcache.replay.results` — below the two
stacks, :mod:`prefixcache.replay.local` (the in-process HF engine) and
:mod:`prefixcache.replay.server` (a running OpenAI-compatible server), which never import
each other; only this facade knows both.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Sequence

from prefixcache.analyzer.errors import ConfigError
from prefixcache.replay.document import ReplayOutcome, ReplayReport, ReplaySession, ServerReport
from prefixcache.replay.options import ReplayOptions, missing_extra

if TYPE_CHECKING:
    from prefixcache.replay.local.engine import Engine


def open_replay(paths: Sequence[str], options: ReplayOptions, *, engine: "Engine | None" = None,
                stdin: IO[bytes] | None = None) -> ReplaySession:
    """Prepare one replay of the logs ``paths`` (``-`` = ``stdin``): in-process when
    ``options.server`` is None (``engine``: any
    :class:`~prefixcache.replay.local.engine.Engine`, default the HF engine of
    ``options.model``), else through the server at that URL (``engine`` must be None).
    Nothing runs yet: the session's ``run()`` returns the
    :class:`~prefixcache.replay.document.ReplayOutcome`. The stacks are imported here, on
    demand (the in-process one needs torch, the server one httpx: without them, ConfigError naming
    the ``replay`` extra). Raises ConfigError /
    InputError / EngineError before any request runs."""
    if options.server is None:
        try:
            from prefixcache.replay.local.session import open_local
        except ImportError as exc:
            raise missing_extra(exc, "replay (in-process)") or exc from None
        return open_local(paths, options, engine=engine, stdin=stdin)
    if engine is not None:
        raise ConfigError("open_replay: an engine replays in-process; drop it or options.server")
    try:
        from prefixcache.replay.server.session import open_server
    except ImportError as exc:
        raise missing_extra(exc, "replay --server") or exc from None
    return open_server(paths, options, stdin=stdin)


def calibrate_tiers(model: str | None = None, device: str = "auto", dtype: str = "float32", threads: int = 2,
                    lengths: Sequence[int] | None = None, repeat: int = 3):
    """Measure prefill and KV restore times on the embedded engine (``prefixcache calibrate``):
    the :class:`~prefixcache.analyzer.cache.fleet.calibration.TierCalibration` of
    :func:`prefixcache.replay.local.calibrate.measure` for ``model`` on ``device`` (``lengths``:
    prompt lengths in tokens, default :data:`~prefixcache.replay.local.calibrate.DEFAULT_LENGTHS`;
    ``repeat`` timed runs each). ConfigError naming the replay extra without torch; EngineError
    for a model that cannot load or a bad length."""
    try:
        from prefixcache.replay.local.calibrate import DEFAULT_LENGTHS, measure
        from prefixcache.replay.local.hf import HFEngine, load_model
    except ImportError as exc:
        raise missing_extra(exc, "calibrate") or exc from None
    engine = HFEngine(load_model(model, device, dtype, threads))
    return measure(engine, lengths or DEFAULT_LENGTHS, repeat)


__all__ = ["ReplayOptions", "ReplayOutcome", "ReplayReport", "ReplaySession", "ServerReport", "calibrate_tiers",
           "open_replay"]
