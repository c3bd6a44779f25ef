"""Measure restore vs recompute on the embedded engine: ``prefixcache calibrate --out FILE``.

For each prompt length (tokens) the prompt is prefilled from scratch on the engine (the timed
forward pass of :meth:`~prefixcache.replay.local.hf.HFEngine.forward`, median of ``repeat``
runs after one warm-up); its KV (every layer's keys and values) is then

* copied to host memory and **restored** from there onto the engine's device: ``cpu-unpinned``
  (pageable host memory) and, when an accelerator is present, ``cpu-pinned`` (page-locked host
  memory, ``Tensor.pin_memory``, copied with ``non_blocking`` and synchronized);
* written to a file on disk (``torch.save``, ``fsync``) and **read back** onto the device:
  ``disk`` (before each read the file's pages are dropped from the page cache with
  ``posix_fadvise(DONTNEED)`` where the OS has it, so the read hits the disk).

Each restore copies exactly the bytes of the prompt's KV (``kv_bytes_per_token × tokens``). The
curves are fitted and written by :mod:`prefixcache.analyzer.cache.fleet.calibration` (the one
fit; ``simulate --tiers … --calibrate FILE`` reads the file). Times are wall-clock seconds
(``time.perf_counter``) around a device synchronize: a measurement, not a logical clock.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from prefixcache.analyzer.cache.fleet.calibration import KIND, Measurement, TierCalibration, calibrate, poor_fits
from prefixcache.analyzer.errors import EngineError
from prefixcache.replay.local.hf import HFEngine

#: Default prompt lengths (tokens) of a calibration run.
DEFAULT_LENGTHS = (128, 256, 512, 1024, 2048)


def _kv_tensors(kv: Any) -> list[torch.Tensor]:
    """Every layer's key and value tensors of a transformers cache."""
    layers = getattr(kv, "layers", None)
    if layers is not None:
        return [t for layer in layers for t in (layer.keys, layer.values)]
    return [*kv.key_cache, *kv.value_cache]


def _timed(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> list[float]:
    fn()  # warm-up: allocator, kernels, file system metadata
    sync()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def _drop_page_cache(path: Path) -> bool:
    """Ask the OS to drop ``path``'s cached pages (True when it could be asked)."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def measure(engine: HFEngine, lengths: Sequence[int] = DEFAULT_LENGTHS, repeat: int = 3,
            workdir: str | Path | None = None) -> TierCalibration:
    """Time prefill and the three restores at every length of ``lengths`` (tokens, each ≥ 2 and
    within the model's context) on ``engine``; ``repeat`` timed runs each (median kept);
    ``workdir``: where the disk file is written (default: a temporary folder). Raises
    EngineError for a length the model cannot take or fewer than two distinct lengths."""
    lengths = sorted(set(int(n) for n in lengths))
    if len(lengths) < 2 or lengths[0] < 2 or lengths[-1] > engine.max_context:
        raise EngineError(f"calibration lengths {lengths}: give at least two, each 2–{engine.max_context} tokens")
    dev = engine.loaded.device
    accel = dev.type != "cpu"
    sync = engine._sync
    vocab = int(engine.model.config.get_text_config(decoder=True).vocab_size)
    points: list[Measurement] = []
    notes = [] if accel else ["cpu-pinned not measured: pinned host memory needs an accelerator (the KV already "
                              "lives in host memory here, so a restore is a host-to-host copy)"]
    dropped = True
    with tempfile.TemporaryDirectory(dir=workdir) as tmp, torch.inference_mode():
        for n in lengths:
            ids = [50 + (i * 7919) % max(1, vocab - 100) for i in range(n)]
            holder: dict[str, Any] = {}

            def prefill() -> None:
                holder["kv"] = engine.forward(ids, None, 0)[1]

            pre = _timed(prefill, sync, repeat)
            kv = _kv_tensors(holder["kv"])
            nbytes = sum(t.numel() * t.element_size() for t in kv)
            points.append(Measurement("prefill", n, statistics.median(pre), nbytes, pre))
            host = [t.to("cpu", copy=True) for t in kv]
            restores: list[tuple[str, Callable[[], Any]]] = [
                ("cpu-unpinned", lambda: [t.to(dev, copy=True) for t in host])]
            if accel:
                pinned = [t.pin_memory() for t in host]
                restores.append(("cpu-pinned", lambda: [t.to(dev, non_blocking=True) for t in pinned]))
            path = Path(tmp) / f"kv-{n}.pt"
            torch.save(host, path)
            with open(path, "rb+") as fh:
                os.fsync(fh.fileno())

            def from_disk() -> None:
                [t.to(dev) for t in torch.load(path, map_location="cpu")]

            def disk() -> None:
                nonlocal dropped
                dropped = _drop_page_cache(path) and dropped
                from_disk()

            restores.append(("disk", disk))
            for name, fn in restores:
                got = _timed(fn, sync, repeat)
                points.append(Measurement(name, n, statistics.median(got), nbytes, got))
    if not dropped:
        notes.append("disk reads may have been served from the page cache (posix_fadvise unavailable)")
    fits = calibrate(points, engine.kv_bytes_per_token)
    return TierCalibration(KIND, engine.name, engine.device, engine.dtype, torch.__version__, torch.get_num_threads(),
                           engine.kv_bytes_per_token, points, fits, notes + poor_fits(fits))
