"""Per-request replay results, streamed to JSONL, and the one summary type.

Every result keeps raw ``perf_counter`` timestamps (seconds) and token counts;
TTFT, prefill time and throughput are derived from them here and nowhere else.
A results file is one JSON object per line, written and flushed as each request
finishes, so an interrupted run keeps everything done so far and ``--resume`` can
continue it.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import IO, Callable, ClassVar, Iterable, Sequence

import numpy as np
import orjson

from prefixcache.analyzer.errors import InputError


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """Raw ``time.perf_counter`` readings of one request (seconds) and what derives from them.

    * ``t_start`` — the request entered the engine (before the cache lookup);
    * ``t_prefill_start`` — lookup and KV assembly done, the forward pass starts;
    * ``t_first_token`` — the first output token is known;
    * ``t_end`` — decode finished; ``store_s`` is the time spent after decode
      writing the prompt's new blocks into the KV store (not part of TTFT).

    Shared by :class:`prefixcache.replay.local.engine.Generation` (what the engine
    measured) and :class:`RequestResult` (what is streamed to JSONL), so TTFT,
    prefill and lookup time have one definition.
    """

    t_start: float
    t_prefill_start: float
    t_first_token: float
    t_end: float
    store_s: float

    @property
    def ttft_s(self) -> float:
        """Time to first token, seconds: cache lookup + KV assembly + prefill + first sampling."""
        return self.t_first_token - self.t_start

    @property
    def prefill_s(self) -> float:
        """Forward pass over the uncached suffix (the computed tokens), seconds."""
        return self.t_first_token - self.t_prefill_start

    @property
    def lookup_s(self) -> float:
        """Cache lookup and KV assembly before the forward pass (inside TTFT), seconds."""
        return self.t_prefill_start - self.t_start


@dataclass(frozen=True, slots=True)
class RequestResult(RequestTiming):
    """One request of one pass.

    ``position`` is the 0-based position in the pass; ``source``/``record`` point at
    the log record. Tokens: ``prompt_tokens`` replayed (after ``--max-prompt-tokens``;
    ``original_tokens`` before), ``cached_tokens`` served from the KV prefix cache,
    ``predicted_cached`` the simulator's prediction for the same configuration,
    ``computed_tokens`` prefilled. Times are the raw seconds of
    :class:`RequestTiming` (its fields come first in the JSONL row). ``kv_bytes``: KV held by the
    cache after the request. ``max_abs_dlogit`` / ``argmax_match`` / ``tokens_match``
    compare with a cold recomputation (None when not verified); ``verify_ok`` is the
    verdict (:meth:`prefixcache.replay.local.passes.Replay._judge`: in float32, same argmax and
    greedy tokens and max |Δlogit| within the tolerance). ``run`` is the digest of the
    run's settings (:func:`prefixcache.replay.local.passes.run_key`; ``--resume`` refuses rows of
    another run); ``ttft_samples`` the TTFTs (seconds) of the ``--repeat`` prefills, whose
    median run's timestamps are the row's.
    """

    pass_name: str
    position: int
    session: str
    request_index: int
    source: str
    record: int
    prompt_tokens: int
    original_tokens: int
    cached_tokens: int
    predicted_cached: int | None
    computed_tokens: int
    kv_bytes: int
    output_ids: tuple[int, ...]
    max_abs_dlogit: float | None = None
    argmax_match: bool | None = None
    tokens_match: bool | None = None
    verify_ok: bool | None = None
    run: str = ""
    ttft_samples: tuple[float, ...] = ()

    @property
    def prefill_tok_s(self) -> float:
        """Computed prefill tokens per second of forward pass."""
        return self.computed_tokens / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def verified(self) -> bool:
        return self.max_abs_dlogit is not None

    @property
    def mismatch(self) -> bool:
        """Verified and not equal to the cold recomputation (argmax, greedy tokens, tolerance)."""
        return self.verified and not self.verify_ok

    #: Figures derived from the fields that each JSONL row also carries (after the fields).
    DERIVED: ClassVar[tuple[str, ...]] = ("ttft_s", "prefill_s", "prefill_tok_s")

    def to_json(self) -> bytes:
        """The JSONL row: every field, then :data:`DERIVED` (``docs/schemas/replay-result.schema.json``)."""
        row = asdict(self)
        row.update({name: getattr(self, name) for name in self.DERIVED})
        return orjson.dumps(row)


_FIELDS = {f.name for f in fields(RequestResult)}


_REQUIRED = tuple(f.name for f in fields(RequestResult) if f.default is MISSING and f.default_factory is MISSING)


def _parse(line: bytes) -> RequestResult:
    """One JSONL row; ValueError (or TypeError for a wrongly typed field) when it is not one."""
    row = orjson.loads(line)
    if not isinstance(row, dict):
        raise ValueError(f"a JSON {type(row).__name__}, not an object")
    missing = [k for k in _REQUIRED if k not in row]
    if missing:
        raise ValueError(f"no {', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}")
    row = {k: v for k, v in row.items() if k in _FIELDS}
    row["output_ids"] = tuple(row["output_ids"])
    row["ttft_samples"] = tuple(row.get("ttft_samples") or ())
    return RequestResult(**row)


def _read(path: Path) -> tuple[list[RequestResult], int]:
    """Results of a JSONL file and the byte length of its intact part. A torn last line
    (from a run killed mid-write: the file's last line, not ended by a newline, that does
    not parse) is excluded; any other bad line — a newline-terminated line is whole, so one
    that does not parse is foreign — raises InputError naming the file and line."""
    data = path.read_bytes()
    out: list[RequestResult] = []
    lines = data.split(b"\n")
    offset = 0
    for n, line in enumerate(lines, 1):
        end = offset + len(line) + (1 if n < len(lines) else 0)
        if line.strip():
            try:
                out.append(_parse(line))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                if n == len(lines):  # the unterminated last line: torn mid-write
                    return out, offset
                raise InputError(f"not a replay result ({exc})", str(path), n) from None
        offset = end
    return out, len(data)


def load_results(path: Path) -> list[RequestResult]:
    """Read a results JSONL file (for ``--resume``). A torn last line (unterminated: the
    run was killed mid-write) is dropped; any other bad line raises InputError."""
    return _read(path)[0]


def repair_tail(path: Path, read: Callable[[Path], tuple[object, int]] | None = None) -> int:
    """Cut a torn last line off ``path`` (and end an intact last line with a newline)
    so rows appended by ``--resume`` start on a line of their own. ``read`` gives the
    bytes to keep (default: this module's results reader; InputError for a bad line
    before the last). Returns the bytes cut."""
    _, keep = (read or _read)(path)
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(keep)
        if keep:
            f.seek(keep - 1)
            if f.read(1) != b"\n":
                f.write(b"\n")
    return size - keep


class ResultWriter:
    """Appends result rows (anything with ``to_json() -> bytes``) to a JSONL file, one
    flushed line per request. With ``append`` a torn last line of the existing file is
    cut first (:func:`repair_tail`, with ``read`` the rows' own reader)."""

    def __init__(self, path: Path | None, append: bool = False,
                 read: Callable[[Path], tuple[object, int]] | None = None) -> None:
        self.path = path
        self._f: IO[bytes] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            if append and path.exists():
                repair_tail(path, read)
            self._f = path.open("ab" if append else "wb")

    def write(self, result: RequestResult) -> None:
        if self._f is not None:
            self._f.write(result.to_json() + b"\n")
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation, numpy's default); 0 when empty."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


@dataclass(frozen=True, slots=True)
class PassSummary:
    """Figures of one pass (one row of the replay summary's ``passes``). Tokens are sums
    over its requests; times are seconds; ``kv_bytes_peak`` bytes.

    ``effective_tok_s`` = prompt tokens served per second of TTFT (cached ones
    included). ``speedup`` = the cold pass's TTFT summed over the same request positions /
    this pass's total TTFT (None without a cold pass); ``simulator_equal`` is True when
    every request's cached tokens equal the simulator's prediction (None in the cold pass).
    ``avoided_prefill`` = cached tokens (prefill not computed); ``hit_rate`` = cached
    share of prompt tokens (0–1).
    """

    pass_name: str
    requests: int
    prompt_tokens: int
    cached_tokens: int
    computed_tokens: int
    ttft_p50: float
    ttft_p95: float
    ttft_p99: float
    ttft_total: float
    effective_tok_s: float
    kv_bytes_peak: int
    verified: int
    mismatches: int
    max_abs_dlogit: float | None
    simulator_equal: bool | None
    speedup: float | None
    avoided_prefill: int
    hit_rate: float

    @classmethod
    def of(cls, pass_name: str, results: Iterable[RequestResult], cold: dict[int, float] | None = None) -> "PassSummary":
        """Summarize ``pass_name``'s results; ``cold`` maps position → cold TTFT (seconds)."""
        rs = [r for r in results if r.pass_name == pass_name]
        ttft = [r.ttft_s for r in rs]
        dl = [r.max_abs_dlogit for r in rs if r.max_abs_dlogit is not None]
        preds = [r.predicted_cached for r in rs if r.predicted_cached is not None]
        total = sum(ttft)
        prompt, cached = sum(r.prompt_tokens for r in rs), sum(r.cached_tokens for r in rs)
        speedup = None
        if cold and pass_name != "cold" and total > 0 and all(r.position in cold for r in rs):
            speedup = sum(cold[r.position] for r in rs) / total
        return cls(
            pass_name=pass_name, requests=len(rs), prompt_tokens=prompt, cached_tokens=cached,
            computed_tokens=sum(r.computed_tokens for r in rs),
            ttft_p50=percentile(ttft, 50), ttft_p95=percentile(ttft, 95), ttft_p99=percentile(ttft, 99),
            ttft_total=total, effective_tok_s=prompt / total if total > 0 else 0.0,
            kv_bytes_peak=max((r.kv_bytes for r in rs), default=0),
            verified=sum(r.verified for r in rs), mismatches=sum(r.mismatch for r in rs),
            max_abs_dlogit=max(dl) if dl else None,
            simulator_equal=(all(r.predicted_cached == r.cached_tokens for r in rs) if preds else None),
            speedup=speedup, avoided_prefill=cached, hit_rate=cached / prompt if prompt else 0.0,
        )


def summarize(results: Sequence[RequestResult], passes: Sequence[str]) -> list[PassSummary]:
    """One summary per pass that has results, speedups against ``cold`` when it ran."""
    cold = {r.position: r.ttft_s for r in results if r.pass_name == "cold"}
    return [PassSummary.of(p, results, cold) for p in passes if any(r.pass_name == p for r in results)]
