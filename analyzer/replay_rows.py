"""The replay ``--out`` row types (one base, a local and a server variant) and the one reader of their JSONL.

A replay results file holds one JSON object per line, written and flushed as each
request finishes (``docs/schemas/replay-result.schema.json`` for the in-process
replay, ``replay-server-result.schema.json`` for ``--server``). Every row starts with
the fields of :class:`ReplayRow` (which request of which pass); :class:`LocalRow` and
:class:`ServerRow` add what each stack measures. Rows keep raw ``time.perf_counter``
readings (seconds) and token counts; TTFT and the other latencies are derived here and
nowhere else (``DERIVED``, appended to each JSONL row after the fields).

:func:`read_rows` is the one reader of such a file (``--resume`` of both stacks, the
HTML report's replay section, the fleet's ``--calibrate``): a torn last line — the
file's last line, not ended by a newline, that does not parse: a run killed mid-write —
is left out; any other bad line is foreign (a newline-terminated line is whole) and
raises :class:`~prefixcache.analyzer.errors.InputError` naming the file, the line and
the field. It lives in analyzer because the report and the fleet read replay output
and analyzer never imports replay.
"""

from __future__ import annotations

import typing
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, ClassVar, TypeVar

import orjson

from prefixcache.analyzer.errors import InputError

T = TypeVar("T")
R = TypeVar("R", bound="ReplayRow")


@dataclass(frozen=True, slots=True)
class ReplayRow:
    """The fields every replay row starts with: ``pass_name`` (``cold``, ``warm``,
    ``canonical``), ``position`` (0-based in the pass), the log record it replays
    (``session`` / ``request_index``, ``source`` file / ``record`` number).

    Subclasses add fields and name their derived figures in ``DERIVED`` (properties
    written after the fields). Raises nothing itself."""

    pass_name: str
    position: int
    session: str
    request_index: int
    source: str
    record: int

    #: Properties appended to each JSONL row after the fields (the schema lists them too).
    DERIVED: ClassVar[tuple[str, ...]] = ()

    @property
    def key(self) -> tuple[str, int]:
        """``(pass_name, position)``: a request of a run (``--resume`` matches rows by it)."""
        return (self.pass_name, self.position)

    def to_json(self) -> bytes:
        """The JSONL row: every field, then :data:`DERIVED`."""
        row = asdict(self)
        row.update({name: getattr(self, name) for name in self.DERIVED})
        return orjson.dumps(row)

    @classmethod
    def from_json(cls: type[R], row: Any) -> R:
        """The row a parsed JSONL object holds (keys that are not fields, such as the
        derived ones, are ignored; JSON lists become the tuples the fields are).
        ValueError naming the first missing field, TypeError for a wrongly typed one."""
        if not isinstance(row, dict):
            raise ValueError(f"a JSON {type(row).__name__}, not an object")
        spec = _spec(cls)
        missing = [k for k in spec.required if k not in row]
        if missing:
            raise ValueError(f"no {', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}")
        kept = {k: v for k, v in row.items() if k in spec.names}
        for k in spec.tuples:
            if k in kept:
                kept[k] = tuple(kept[k] or ())
        return cls(**kept)


@dataclass(frozen=True, slots=True)
class _Spec:
    names: frozenset[str]
    required: tuple[str, ...]
    tuples: tuple[str, ...]


_SPECS: dict[type, _Spec] = {}


def _spec(cls: type) -> _Spec:
    """Field names, required fields and tuple-typed fields of a row type (cached)."""
    if cls not in _SPECS:
        hints = typing.get_type_hints(cls)
        fs = fields(cls)
        _SPECS[cls] = _Spec(frozenset(f.name for f in fs),
                            tuple(f.name for f in fs if f.default is MISSING and f.default_factory is MISSING),
                            tuple(f.name for f in fs if typing.get_origin(hints[f.name]) is tuple))
    return _SPECS[cls]


class _Timed:
    """TTFT, prefill and lookup time of the four ``perf_counter`` readings (seconds) of
    :class:`RequestTiming` and :class:`LocalRow`: one definition for both."""

    __slots__ = ()
    t_start: float
    t_prefill_start: float
    t_first_token: float

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
class RequestTiming(_Timed):
    """Raw ``time.perf_counter`` readings of one in-process request (seconds):

    * ``t_start`` — the request entered the engine (before the cache lookup);
    * ``t_prefill_start`` — lookup and KV assembly done, the forward pass starts;
    * ``t_first_token`` — the first output token is known;
    * ``t_end`` — decode finished; ``store_s`` is the time spent after decode
      writing the prompt's new blocks into the KV store (not part of TTFT).

    What an engine measured (``prefixcache.replay.local.engine.Generation``); a
    :class:`LocalRow` carries the same readings."""

    t_start: float
    t_prefill_start: float
    t_first_token: float
    t_end: float
    store_s: float


@dataclass(frozen=True, slots=True)
class LocalRow(_Timed, ReplayRow):
    """One request of one pass of an in-process replay (``replay --out``).

    After the :class:`ReplayRow` fields: the raw seconds of :class:`RequestTiming`
    (``t_start`` … ``store_s``). Tokens: ``prompt_tokens`` replayed (after
    ``--max-prompt-tokens``; ``original_tokens`` before), ``cached_tokens`` served from
    the KV prefix cache, ``predicted_cached`` the simulator's prediction for the same
    configuration (None in the cold pass), ``computed_tokens`` prefilled. ``kv_bytes``:
    KV held by the cache after the request (bytes). ``max_abs_dlogit`` /
    ``argmax_match`` / ``tokens_match`` compare with a cold recomputation (None when
    not verified); ``verify_ok`` is the verdict (in float32: same argmax and greedy
    tokens and max |Δlogit| within the tolerance). ``run`` is the digest of the run's
    settings (``--resume`` refuses rows of another run); ``ttft_samples`` the TTFTs
    (seconds) of the ``--repeat`` prefills, whose median run's timestamps are the row's.
    """

    t_start: float
    t_prefill_start: float
    t_first_token: float
    t_end: float
    store_s: float
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

    DERIVED: ClassVar[tuple[str, ...]] = ("ttft_s", "prefill_s", "prefill_tok_s")

    @property
    def prefill_tok_s(self) -> float:
        """Computed prefill tokens per second of forward pass."""
        return self.computed_tokens / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def verified(self) -> bool:
        """Compared with a cold recomputation."""
        return self.max_abs_dlogit is not None

    @property
    def mismatch(self) -> bool:
        """Verified and not equal to the cold recomputation (argmax, greedy tokens, tolerance)."""
        return self.verified and not self.verify_ok


@dataclass(frozen=True, slots=True)
class ServerRow(ReplayRow):
    """One request of one pass through a server (``replay --server URL --out``).

    After the :class:`ReplayRow` fields: ``send`` (``tokens`` or ``chat``). Tokens:
    ``prompt_tokens`` ours (after ``--max-prompt-tokens``), ``engine_prompt_tokens`` the
    engine's ``usage.prompt_tokens``, ``cached_tokens`` the engine's (None when it
    reported none), ``predicted_cached`` the simulator's for the engine's cache
    configuration (None when not predicted), ``completion_tokens``. Raw
    ``perf_counter`` seconds: ``t_scheduled`` (when the load shape wanted it sent),
    ``t_send``, ``t_first_token`` (None if no output came), ``token_times`` (each
    streamed chunk with output), ``t_end``. ``in_flight``: the other requests of the
    pass in flight when this one was sent (those sent in the same dispatch round included). ``status`` ``ok`` / ``error``, ``reason``,
    ``attempts``; ``run``: the settings digest (``--resume`` refuses rows of another run).
    ``warmup``: sent during the ``--warmup`` (left out of the serving figures);
    ``engine_queue_s``: the time the engine says the request waited in its queue (seconds;
    None where the engine reports none per request); ``epoch``: which replay process sent it
    (its ``perf_counter`` clock: rows of an interrupted run and of the ``--resume`` that finished
    it have different epochs, and their times are never compared). Rows written before these
    fields existed read with their defaults.
    """

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
    warmup: bool = False
    engine_queue_s: float | None = None
    epoch: str = ""

    DERIVED: ClassVar[tuple[str, ...]] = ("ttft_s", "tpot_s", "e2e_s")

    @property
    def ok(self) -> bool:
        """The request succeeded (``status`` ``ok``)."""
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
        """Time per output token after the first, seconds, as ``vllm bench serve`` defines it:
        (E2E − TTFT) ÷ (output tokens − 1), output tokens = the engine's ``completion_tokens``
        (else the streamed chunks); None with fewer than two output tokens or no first token."""
        n = self.completion_tokens if self.completion_tokens is not None else len(self.token_times)
        if n < 2 or self.t_first_token is None:
            return None
        return (self.t_end - self.t_first_token) / (n - 1)

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
        """Engine's cached tokens = the prediction (None when either is missing or the request failed)."""
        if self.cached_tokens is None or self.predicted_cached is None or not self.ok:
            return None
        return self.cached_tokens == self.predicted_cached


def read_rows(path: str | Path, parse: Callable[[Any], T]) -> tuple[list[T], int]:
    """``parse`` of every row of the replay results JSONL file ``path`` in file order
    (blank lines skipped), and the byte length of the file's intact part (all of it
    unless the last line is torn; see the module docstring). ``parse`` takes the parsed
    JSON value of one line and raises ValueError, TypeError, KeyError or AttributeError
    for one that is not a row. InputError for an unreadable file, or a bad line other
    than a torn last one: ``FILE:LINE: not a replay result row (why, naming the field)``."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read replay results ({exc.strerror or exc})", str(path)) from None
    lines = data.split(b"\n")
    out: list[T] = []
    offset = 0
    for n, line in enumerate(lines, 1):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            out.append(parse(orjson.loads(line)))
        except orjson.JSONDecodeError:
            if n == len(lines):  # the unterminated last line: torn mid-write
                return out, start
            raise InputError("not a replay result row (not JSON: a replay --out file has one JSON object per line)",
                             str(path), n) from None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            if n == len(lines):
                return out, start
            why = f"no {exc.args[0]}" if isinstance(exc, KeyError) else str(exc)
            raise InputError(f"not a replay result row ({why})", str(path), n) from None
    return out, len(data)


def load_rows(path: str | Path, row_type: type[R]) -> list[R]:
    """The rows of type ``row_type`` (:class:`LocalRow` or :class:`ServerRow`) in ``path``
    (:func:`read_rows`: a torn last line dropped, InputError for any other bad line)."""
    return read_rows(path, row_type.from_json)[0]
