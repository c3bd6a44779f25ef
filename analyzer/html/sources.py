"""The documents a report reads from files: a replay run's JSONL and a simulate JSON.

Both are read as the documented schemas say (docs/schemas/replay-result.schema.json, one
object per line; docs/schemas/simulate.schema.json, one object), kept as the parsed JSON
values: the report shows their figures as written, never recomputed. Only the keys a
section needs are required; every other key is carried along untouched. A fleet
simulation's document (``simulate --replicas N --json``, docs/schemas/simulate-fleet.schema.json:
a :class:`~prefixcache.analyzer.cache.fleet.document.FleetReport`) is told apart by its
``replicas`` key and must carry every key of that type and of each router row (a row saved
by the release before ``ttft`` existed gets it from its flat ``ttft_p*_s`` keys). Errors: :class:`~prefixcache.analyzer.errors.InputError` naming the file
(and line) for an unreadable file, bad JSON or a row without the keys the report needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefixcache.analyzer.ingest.jsonio import loads as json_loads

from prefixcache.analyzer.cache.fleet.document import FleetReport, RouterRow
from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.replay_rows import read_rows

#: Keys every replay row must carry for the replay section (docs/schemas/replay-result.schema.json).
REPLAY_KEYS = ("pass_name", "session", "request_index", "prompt_tokens", "cached_tokens", "ttft_s")

#: Keys a simulate document must carry (docs/schemas/simulate.schema.json).
SIMULATE_KEYS = ("cache", "block_size", "results")

#: Keys of a fleet document and of each of its ``results`` rows (the fields of the library types).
FLEET_KEYS = tuple(FleetReport.__dataclass_fields__)
ROUTER_KEYS = tuple(RouterRow.__dataclass_fields__)
#: The deprecated flat TTFT keys of a router row (seconds), in ``ttft``'s order p50, p95, p99.
FLAT_TTFT = ("ttft_p50_s", "ttft_p95_s", "ttft_p99_s")


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path) from None


def _replay_row(row: Any) -> dict[str, Any]:
    missing = [k for k in REPLAY_KEYS if not isinstance(row, dict) or k not in row]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    return row


def read_replay(path: str) -> list[dict[str, Any]]:
    """The rows of a ``replay --out`` JSONL file, in file order, as parsed JSON objects
    (:func:`~prefixcache.analyzer.replay_rows.read_rows`: blank lines ignored, a torn last
    line, as an interrupted run leaves it, dropped). InputError for an unreadable file,
    bad JSON elsewhere, a row that is not an object with :data:`REPLAY_KEYS`, or no rows."""
    rows = read_rows(path, _replay_row)[0]
    if not rows:
        raise InputError("no replay result rows", path)
    return rows


def read_simulate(path: str) -> dict[str, Any]:
    """The ``simulate --json`` document in ``path``. InputError when it is not JSON or not a
    simulate document (no :data:`SIMULATE_KEYS`)."""
    try:
        doc = json_loads(_read(path))
    except ValueError as exc:  # not JSON, or nested past the depth limit
        raise InputError(f"not JSON ({exc})", path) from None
    missing = [k for k in SIMULATE_KEYS if not isinstance(doc, dict) or k not in doc]
    if missing:
        raise InputError(f"not a simulate --json document (missing {', '.join(missing)})", path)
    if "replicas" in doc:
        _check_fleet(path, doc)
    return doc


def is_fleet(doc: dict[str, Any]) -> bool:
    """Whether a document :func:`read_simulate` returned is a fleet simulation's."""
    return "replicas" in doc


def _check_fleet(path: str, doc: dict[str, Any]) -> None:
    missing = [k for k in FLEET_KEYS if k not in doc]
    if missing:
        raise InputError(f"not a simulate --replicas N --json document (missing {', '.join(missing)})", path)
    for n, row in enumerate(doc["results"]):
        if isinstance(row, dict) and "ttft" not in row and all(k in row for k in FLAT_TTFT):
            row["ttft"] = _ttft_from_flat(row)
        missing = [k for k in ROUTER_KEYS if not isinstance(row, dict) or k not in row]
        if missing:
            raise InputError(f"results[{n}] is not a router row (missing {', '.join(missing)})", path)


def _ttft_from_flat(row: dict[str, Any]) -> dict[str, Any]:
    """The ``ttft`` object of a router row saved before it existed (the previous release wrote
    only ``ttft_p50_s`` / ``ttft_p95_s`` / ``ttft_p99_s``): those three percentiles as written,
    the figures that release did not write (count, mean, max) null."""
    p50, p95, p99 = (row[k] for k in FLAT_TTFT)
    return {"count": None, "mean": None, "p50": p50, "p95": p95, "p99": p99, "max": None}
