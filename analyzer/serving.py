"""Serving figures of a replay through a server, defined as ``vllm bench serve`` defines them.

One computation for the ``replay --server --json`` summary (per pass) and the HTML report's
replay section, whatever the engine, from the rows alone
(:class:`~prefixcache.analyzer.replay_rows.ServerRow`; raw ``perf_counter`` readings). The
definitions follow vLLM's ``vllm/benchmarks/serve.py`` (``calculate_metrics``):

* **TTFT** — first streamed chunk with output − send, per request;
* **TPOT** — (E2E − TTFT) ÷ (output tokens − 1), per request with more than one output
  token (output tokens: the engine's ``usage.completion_tokens``, else the chunks counted);
* **ITL** — the gaps between consecutive streamed chunks, pooled over all requests;
* **E2E** — stream closed − send, per request;
* percentiles P50 / P90 / P95 / P99 by linear interpolation (numpy's default, as vLLM);
* **duration** — first measured send → last measured response (seconds; a run finished by `--resume`
  adds each process's span, never the time between them);
* **request / output / total token throughput** — completed requests, output tokens,
  prompt + output tokens, each ÷ duration;
* **goodput** under ``--slo ttft=…,tpot=…,e2e=…`` — completed requests meeting every SLO
  given (metric ≤ target; TPOT counted as 0 for a one-token answer, as vLLM does) ÷ duration.

Requests marked ``warmup`` are left out of every figure (counted in ``warmup``); failed
requests out of the latencies and throughputs (counted in ``failed``). ``per_second``: the
requests completed in each second since the first measured send, with their prompt, cached
and output tokens and the hit ratio (cached ÷ prompt tokens, engine-reported cached tokens).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.replay_rows import ServerRow
from prefixcache.analyzer.stats import Distribution

#: The metrics an SLO may bound (``--slo``), as vLLM's ``--goodput`` names them (``e2el`` = ``e2e``).
SLO_METRICS = ("ttft", "tpot", "e2e")


def parse_slo(text: str | None) -> dict[str, float]:
    """``ttft=500ms,tpot=50ms,e2e=2s`` → ``{"ttft": 0.5, "tpot": 0.05, "e2e": 2.0}`` (seconds).
    A value is a number with ``ms`` or ``s`` (a bare number is milliseconds, as vLLM's
    ``--goodput``); ``:`` may stand for ``=``. ConfigError naming the bad part."""
    out: dict[str, float] = {}
    if not text or not text.strip():
        return out
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        m = re.fullmatch(r"([a-z0-9_]+)[=:]([0-9]*\.?[0-9]+)(ms|s)?", part.strip().lower())
        if not m:
            raise ConfigError(f"--slo {part}: give METRIC=VALUE, e.g. ttft=500ms,tpot=50ms")
        name = "e2e" if m.group(1) == "e2el" else m.group(1)
        if name not in SLO_METRICS:
            raise ConfigError(f"--slo {part}: choose metrics from {', '.join(SLO_METRICS)}")
        value = float(m.group(2)) / (1.0 if m.group(3) == "s" else 1000.0)
        if not value > 0:
            raise ConfigError(f"--slo {part}: the target must be > 0")
        out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class SecondRow:
    """Requests completed in second ``second`` (0 = the first second after the first measured
    send): ``requests``, ``prompt_tokens``, ``cached_tokens`` (engine-reported), ``hit_ratio``
    (cached ÷ prompt; None without prompt tokens), ``output_tokens``."""

    second: int
    requests: int
    prompt_tokens: int
    cached_tokens: int
    hit_ratio: float | None
    output_tokens: int


@dataclass(frozen=True, slots=True)
class ServingFigures:
    """The serving figures of one pass (see the module docstring for each definition).

    Counts: ``measured`` (rows counted: neither warm-up nor failed), ``warmup`` (left out),
    ``failed`` (measured-window failures). Seconds: ``duration_s``; latencies (6 decimals)
    ``ttft``, ``tpot``, ``itl``, ``e2e``. Tokens: ``input_tokens``, ``output_tokens``,
    ``cached_tokens``. Rates over the duration: ``request_throughput`` (requests/s),
    ``output_throughput`` and ``total_token_throughput`` (tokens/s). ``slo`` (seconds per
    metric), ``good`` and ``goodput`` (requests/s; both None without an SLO). ``in_flight``:
    the distribution of the other requests in flight at each measured send, and
    ``in_flight_counts`` its histogram (item k = the sends with k others in flight).
    ``per_second``: :class:`SecondRow` values."""

    measured: int
    warmup: int
    failed: int
    duration_s: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    slo: dict[str, float]
    good: int | None
    goodput: float | None
    in_flight: Distribution
    in_flight_counts: tuple[int, ...]
    per_second: tuple[SecondRow, ...]


def output_tokens(r: ServerRow) -> int:
    """Output tokens of a row: the engine's ``completion_tokens``, else the streamed chunks."""
    return r.completion_tokens if r.completion_tokens is not None else len(r.token_times)


def _meets(r: ServerRow, slo: dict[str, float]) -> bool:
    values = {"ttft": r.ttft_s, "tpot": r.tpot_s or 0.0, "e2e": r.e2e_s}
    return all(values[k] is not None and values[k] <= v for k, v in slo.items())


def serving_figures(rows: Sequence[ServerRow], slo: dict[str, float] | None = None) -> ServingFigures:
    """The figures of one pass's ``rows`` under ``slo`` (seconds per metric; None or empty = no
    goodput). Never raises; a pass without measured rows has zero rates and empty distributions."""
    slo = dict(slo or {})
    warm = [r for r in rows if r.warmup]
    window = [r for r in rows if not r.warmup]
    good_rows = [r for r in window if r.ok]
    spans = _spans(window)
    dur = sum(end - start for start, end in spans.values())

    def rate(x: float) -> float:
        return round(x / dur, 3) if dur > 0 else 0.0
    n_in = sum(r.prompt_tokens for r in good_rows)
    n_out = sum(output_tokens(r) for r in good_rows)
    good = sum(_meets(r, slo) for r in good_rows) if slo else None
    return ServingFigures(
        measured=len(good_rows), warmup=len(warm), failed=len(window) - len(good_rows), duration_s=round(dur, 6),
        ttft=Distribution.of(r.ttft_s for r in good_rows), tpot=Distribution.of(r.tpot_s for r in good_rows),
        itl=Distribution.of(x for r in good_rows for x in r.itl_s), e2e=Distribution.of(r.e2e_s for r in good_rows),
        input_tokens=n_in, output_tokens=n_out, cached_tokens=sum(r.cached_tokens or 0 for r in good_rows),
        request_throughput=rate(len(good_rows)), output_throughput=rate(n_out),
        total_token_throughput=rate(n_in + n_out), slo=slo, good=good,
        goodput=None if good is None else rate(good), in_flight=Distribution.of((r.in_flight for r in window), 3),
        in_flight_counts=_counts(r.in_flight for r in window), per_second=per_second(good_rows, spans))


def _counts(values: Iterable[int]) -> tuple[int, ...]:
    """Histogram of non-negative ints: item k = how many values equal k (empty without values)."""
    vals = list(values)
    out = [0] * (max(vals) + 1 if vals else 0)
    for v in vals:
        out[v] += 1
    return tuple(out)


def _spans(rows: Sequence[ServerRow]) -> dict[str, tuple[float, float]]:
    """Per process clock (``ServerRow.epoch``, in order of first row): (first send, last response).
    One replay is one span; a run finished by ``--resume`` is two, and the time between them
    (and the other process's clock) never counts."""
    out: dict[str, tuple[float, float]] = {}
    for r in rows:
        s, e = out.get(r.epoch, (r.t_send, r.t_end))
        out[r.epoch] = (min(s, r.t_send), max(e, r.t_end))
    return out


def per_second(rows: Sequence[ServerRow], spans: dict[str, tuple[float, float]]) -> tuple[SecondRow, ...]:
    """:class:`SecondRow` per second of the measured time (``spans``: :func:`_spans`, laid end to
    end), by the second each response of ``rows`` ended in (empty seconds included)."""
    if not rows:
        return ()
    offset, at = {}, 0.0
    for epoch, (start, end) in spans.items():
        offset[epoch] = at - start
        at += end - start

    def second(r: ServerRow) -> int:
        return max(0, int(r.t_end + offset.get(r.epoch, 0.0)))
    last = max(second(r) for r in rows)
    acc = [[0, 0, 0, 0] for _ in range(last + 1)]
    for r in rows:
        a = acc[second(r)]
        a[0] += 1
        a[1] += r.prompt_tokens
        a[2] += r.cached_tokens or 0
        a[3] += output_tokens(r)
    return tuple(SecondRow(s, a[0], a[1], a[2], round(a[2] / a[1], 6) if a[1] else None, a[3])
                 for s, a in enumerate(acc))
