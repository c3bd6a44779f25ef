"""Per-request results of a replay through a server, and the figures derived from them.

A :class:`ServedResult` row keeps raw ``perf_counter`` timestamps (seconds) and the token
counts the engine reported next to ours and the simulator's prediction; TTFT, TPOT, ITL and
end-to-end latency are derived here and nowhere else, and every percentile comes from one
type, :class:`Distribution`. Rows stream to JSONL as requests finish (``--out``); a failed
request is a row too (``status`` ``error`` and its ``reason``).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import ClassVar, Iterable, Sequence

import numpy as np
import orjson

from prefixcache.analyzer.errors import InputError
from prefixcache.replay.local.results import ResultWriter


@dataclass(frozen=True, slots=True)
class ServedResult:
    """One request of one pass through a server.

    Position: ``pass_name``, ``position`` (0-based in the pass), ``session`` /
    ``request_index`` / ``source`` / ``record`` (the log record). ``send``: ``tokens`` or
    ``chat``. Tokens: ``prompt_tokens`` ours (after ``--max-prompt-tokens``),
    ``engine_prompt_tokens`` the engine's ``usage.prompt_tokens``, ``cached_tokens`` the
    engine's (None when it reported none), ``predicted_cached`` the simulator's for the
    engine's cache configuration (None when not predicted), ``completion_tokens``.
    Raw ``perf_counter`` seconds: ``t_scheduled`` (when the load shape wanted it sent),
    ``t_send``, ``t_first_token`` (None if no output came), ``token_times`` (each
    streamed chunk with output), ``t_end``. ``in_flight``: requests of the pass in flight
    when this one was sent. ``status`` ``ok`` / ``error``, ``reason``, ``attempts``;
    ``run``: the settings digest (``--resume`` refuses rows of another run).
    """

    pass_name: str
    position: int
    session: str
    request_index: int
    source: str
    record: int
    send: str
    prompt_tokens: int
    engine_prompt_tokens: int | None
    cached_tokens: int | None
    predicted_cached: int | None
    completion_tokens: int | None
    t_scheduled: float
    t_send: float
    t_first_token: float | None
    token_times: tuple[float, ...]
    t_end: float
    in_flight: int
    status: str
    reason: str
    attempts: int
    run: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def ttft_s(self) -> float | None:
        """Time to first token, seconds (send → first streamed output)."""
        return None if self.t_first_token is None else self.t_first_token - self.t_send

    @property
    def e2e_s(self) -> float:
        """End-to-end latency, seconds (send → stream closed)."""
        return self.t_end - self.t_send

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first, seconds (None with fewer than two chunks)."""
        t = self.token_times
        return (t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else None

    @property
    def itl_s(self) -> tuple[float, ...]:
        """Inter-token latencies, seconds (gaps between streamed output chunks)."""
        t = self.token_times
        return tuple(b - a for a, b in zip(t, t[1:]))

    @property
    def queue_s(self) -> float:
        """Client-side delay between the load shape's send time and the actual send, seconds."""
        return self.t_send - self.t_scheduled

    @property
    def reconciles(self) -> bool | None:
        """Engine's cached tokens = the prediction (None when either is missing)."""
        if self.cached_tokens is None or self.predicted_cached is None or not self.ok:
            return None
        return self.cached_tokens == self.predicted_cached

    DERIVED: ClassVar[tuple[str, ...]] = ("ttft_s", "tpot_s", "e2e_s")

    def to_json(self) -> bytes:
        """The JSONL row: every field, then :data:`DERIVED`."""
        row = asdict(self)
        row.update({name: getattr(self, name) for name in self.DERIVED})
        return orjson.dumps(row)


_FIELDS = tuple(f.name for f in fields(ServedResult))
_REQUIRED = tuple(f.name for f in fields(ServedResult) if f.default is MISSING)


def load_served(path: Path) -> list[ServedResult]:
    """Rows of a results file (``--resume``): a torn last line is dropped, any other bad line
    raises InputError naming the file and line."""
    return _read(path)[0]


def _read(path: Path) -> tuple[list[ServedResult], int]:
    """Rows of ``path`` and the byte length of its intact part (a torn last line excluded)."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    out = []
    offset = 0
    for n, line in enumerate(lines, 1):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
            missing = [k for k in _REQUIRED if k not in row]
            if missing:
                raise ValueError(f"no {', '.join(missing[:3])}")
            row = {k: row[k] for k in _FIELDS}
            row["token_times"] = tuple(row["token_times"])
            out.append(ServedResult(**row))
        except (ValueError, TypeError, AttributeError) as exc:
            if n == len(lines):
                return out, start  # the unterminated last line: torn mid-write
            raise InputError(f"not a server replay result ({exc})", str(path), n) from None
    return out, len(data)


class ServedWriter(ResultWriter):
    """Streams server-replay rows to a JSONL file, one flushed line each; with ``append``
    a torn last line is cut first (:func:`~prefixcache.replay.local.results.repair_tail` with
    this module's reader), so appended rows start on their own line."""

    def __init__(self, path: Path | None, append: bool = False) -> None:
        super().__init__(path, append, read=_read)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Percentiles of one latency over a pass's requests (seconds; linear interpolation,
    numpy's default). ``count``: samples; all figures None without samples."""

    count: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, values: Iterable[float | None]) -> "Distribution":
        v = np.asarray([x for x in values if x is not None], dtype=float)
        if not v.size:
            return cls(0, None, None, None, None, None)
        q = np.percentile(v, [50, 95, 99])
        return cls(int(v.size), _r(v.mean()), _r(q[0]), _r(q[1]), _r(q[2]), _r(v.max()))


def _r(x: float) -> float:
    return round(float(x), 6)


@dataclass(frozen=True, slots=True)
class Difference:
    """A request whose engine cached tokens differ from the prediction: ``by`` = engine −
    predicted (tokens), ``fact`` the engine behaviour that explains it (or ``unexplained``)."""

    pass_name: str
    position: int
    source: str
    record: int
    cached_tokens: int | None
    predicted_cached: int | None
    by: int | None
    fact: str


@dataclass(frozen=True, slots=True)
class PromptMismatch:
    """PC504: with ``--send chat`` the engine counted ``engine_prompt_tokens`` where our
    template and tokenizer give ``prompt_tokens`` (``by`` = engine − ours)."""

    code: str
    pass_name: str
    position: int
    source: str
    record: int
    prompt_tokens: int
    engine_prompt_tokens: int
    by: int


def prompt_mismatches(rows: Sequence[ServedResult]) -> list[PromptMismatch]:
    """PC504 findings: chat requests whose engine prompt count differs from ours."""
    return [PromptMismatch("PC504", r.pass_name, r.position, r.source, r.record, r.prompt_tokens,
                           r.engine_prompt_tokens, r.engine_prompt_tokens - r.prompt_tokens)
            for r in rows if r.ok and r.send == "chat" and r.engine_prompt_tokens is not None
            and r.engine_prompt_tokens != r.prompt_tokens]
