"""Restore vs recompute, measured: the tier calibration file and the fits it carries.

``prefixcache calibrate --out FILE`` (:mod:`prefixcache.replay.local.calibrate`) times, on the
embedded engine, the prefill of prompts of several lengths and the restore of the same KV —
copied back from host memory (pageable and, on an accelerator, pinned) and read back from a
file on disk — and writes one JSON document, :class:`TierCalibration`. Every curve is fitted
by least squares of the relative residuals as ``seconds = intercept_s + per_token_s × tokens``
(:func:`fit_line`), with its error; the **break-even length** of a tier is the prompt length
from which restoring its KV is faster than recomputing it (:func:`break_even_tokens`).

``simulate --replicas N --tiers … --calibrate FILE`` reads it (:func:`read_calibration`): the
prefill fit replaces the hardware preset's prefill rate and overhead, and each restore fit
becomes the link of its tier (:func:`tier_links`: bandwidth = KV bytes per token ÷
``per_token_s``, latency = ``intercept_s``) for tiers named ``cpu`` or ``disk`` that give no
``@BANDWIDTH`` of their own; a restore is still taken only where it beats recomputing
(:func:`~.tiers.plan_restore`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from prefixcache.analyzer.ingest.jsonio import loads as json_loads

from prefixcache.analyzer.errors import InputError

#: The ``kind`` of a calibration document (how ``--calibrate`` tells it from replay rows).
KIND = "prefixcache-tier-calibration"
#: The restore curve each ``--tiers`` name takes, in order of preference.
TIER_CURVES = {"cpu": ("cpu-pinned", "cpu-unpinned"), "disk": ("disk",)}


@dataclass(frozen=True, slots=True)
class LineFit:
    """``seconds = intercept_s + per_token_s × tokens`` by relative least squares over ``points``
    measurements: ``mean_rel_error`` (mean |residual| ÷ measured), ``max_rel_error`` and R²."""

    points: int
    intercept_s: float
    per_token_s: float
    mean_rel_error: float
    max_rel_error: float
    r2: float

    def seconds(self, tokens: float) -> float:
        """The fitted time of ``tokens`` tokens (seconds)."""
        return self.intercept_s + self.per_token_s * tokens


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> LineFit:
    """The line through ``(xs, ys)`` (tokens, seconds) minimizing the squared *relative* residuals
    (numpy ``polyfit`` degree 1 with weights ``1/y``): timing noise grows with the time, so an
    unweighted fit would let the longest prompts decide the intercept. ValueError for fewer
    than two distinct ``xs`` or a time ≤ 0."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if len(set(x.tolist())) < 2:
        raise ValueError("a line fit needs at least two distinct lengths")
    if (y <= 0).any():
        raise ValueError("a line fit needs positive times")
    slope, icpt = np.polyfit(x, y, 1, w=1.0 / y)
    res = y - (icpt + slope * x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    rel = np.abs(res) / np.where(y > 0, y, np.inf)
    return LineFit(int(x.size), float(icpt), float(slope), round(float(rel.mean()), 6), round(float(rel.max()), 6),
                   round(1.0 - float((res ** 2).sum()) / ss_tot, 6) if ss_tot else 1.0)


def break_even_tokens(prefill: LineFit, restore: LineFit) -> float | None:
    """The prompt length (tokens) from which ``restore`` is faster than ``prefill``: 0.0 when it
    always is (over lengths ≥ 0), None when it never is, else where the two lines cross."""
    d_icpt = restore.intercept_s - prefill.intercept_s
    d_slope = prefill.per_token_s - restore.per_token_s
    if d_slope <= 0:
        return 0.0 if d_icpt < 0 and d_slope == 0 else None
    return max(0.0, d_icpt / d_slope)


@dataclass(frozen=True, slots=True)
class Measurement:
    """One timed operation: ``curve`` (``prefill``, ``cpu-unpinned``, ``cpu-pinned``, ``disk``) at
    ``tokens`` tokens: the median of ``samples`` (seconds) and the KV bytes moved."""

    curve: str
    tokens: int
    seconds: float
    kv_bytes: int
    samples: list[float]


@dataclass(frozen=True, slots=True)
class CurveFit:
    """One curve's fit and, for restores, its break-even length against the prefill (tokens; null:
    never faster) and the link it implies (bytes/s, seconds per restore)."""

    curve: str
    fit: LineFit
    break_even_tokens: float | None
    bandwidth_bytes_s: float | None
    latency_s: float | None


#: Below this R² a fit is called poor (:func:`poor_fits`): the line explains too little of the timings.
MIN_R2 = 0.9


def poor_fits(fits: Sequence[CurveFit], min_r2: float = MIN_R2) -> list[str]:
    """One warning per fit whose R² is under ``min_r2`` (its line explains too little of the measured
    times: a loaded machine, or a first length still warming up), naming the curve, R² and mean
    relative error. The break-even lengths of such fits are not to be quoted."""
    return [f"warning: the {f.curve} fit is poor (R² {f.fit.r2:.2f}, mean error {100 * f.fit.mean_rel_error:.0f}%): "
            "its timings are noisy (a loaded machine or a cold first length); rerun with more --repeat on an idle "
            "machine before quoting its break-even length" for f in fits if f.fit.r2 < min_r2]


@dataclass(frozen=True, slots=True)
class TierCalibration:
    """The ``calibrate --out`` document (module docstring): where it was measured (model, device,
    dtype, torch, threads), KV bytes per token, every measurement and every curve's fit, the
    prefill first."""

    kind: str
    model: str
    device: str
    dtype: str
    torch: str
    threads: int
    kv_bytes_per_token: int
    measurements: list[Measurement]
    fits: list[CurveFit]
    notes: list[str]


def calibrate(points: Sequence[Measurement], kv_bytes_per_token: int) -> list[CurveFit]:
    """The fit of every curve in ``points`` (``prefill`` first), restores with their break-even
    length and link. ValueError without a prefill curve of two distinct lengths."""
    curves: dict[str, list[Measurement]] = {}
    for p in points:
        curves.setdefault(p.curve, []).append(p)
    if "prefill" not in curves:
        raise ValueError("a calibration needs prefill measurements")
    pre = fit_line([p.tokens for p in curves["prefill"]], [p.seconds for p in curves["prefill"]])
    out = [CurveFit("prefill", pre, None, None, None)]
    for name, pts in curves.items():
        if name == "prefill":
            continue
        f = fit_line([p.tokens for p in pts], [p.seconds for p in pts])
        bw = kv_bytes_per_token / f.per_token_s if f.per_token_s > 0 else None
        out.append(CurveFit(name, f, break_even_tokens(pre, f), bw, max(0.0, f.intercept_s)))
    return out


def read_calibration(path: str | Path) -> TierCalibration | None:
    """The :class:`TierCalibration` in ``path``, or None when the file is not one (replay rows,
    JSON Lines). InputError naming the file for a missing file or a calibration document that
    lacks a field."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            if KIND.encode() not in fh.read(4096):  # the document names its kind first
                return None
            fh.seek(0)
            doc = json_loads(fh.read())
    except OSError as exc:
        raise InputError(f"cannot read calibration file: {exc.strerror or exc}", str(path)) from exc
    except ValueError:
        return None  # JSON Lines: replay rows
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        return None
    try:
        fits = [CurveFit(f["curve"], LineFit(**f["fit"]), f["break_even_tokens"], f["bandwidth_bytes_s"],
                         f["latency_s"]) for f in doc["fits"]]
        meas = [Measurement(**m) for m in doc["measurements"]]
        return TierCalibration(KIND, doc["model"], doc["device"], doc["dtype"], doc["torch"], doc["threads"],
                               doc["kv_bytes_per_token"], meas, fits, list(doc.get("notes", [])))
    except (KeyError, TypeError) as exc:
        raise InputError(f"not a complete tier calibration (field {exc})", str(path)) from exc


def tier_links(cal: TierCalibration) -> dict[str, tuple[float, float]]:
    """``--tiers`` name → (bandwidth bytes/s, latency s) from the restore fits of ``cal``
    (:data:`TIER_CURVES`: ``cpu`` takes the pinned curve where measured, else the pageable one)."""
    by = {f.curve: f for f in cal.fits}
    out = {}
    for tier, names in TIER_CURVES.items():
        f = next((by[n] for n in names if n in by and by[n].bandwidth_bytes_s), None)
        if f is not None:
            out[tier] = (float(f.bandwidth_bytes_s), float(f.latency_s or 0.0))
    return out


def prefill_fit(cal: TierCalibration) -> LineFit:
    """The prefill curve's fit of ``cal``."""
    return next(f.fit for f in cal.fits if f.curve == "prefill")
