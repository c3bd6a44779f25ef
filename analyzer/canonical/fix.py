"""``lint --fix``: a cache-stable copy of each input file, beside it (``NAME.fixed.EXT``).

The canonicalize engine (:func:`~prefixcache.analyzer.canonical.rewrite.canonicalize_requests`,
default options) rewrites every request; each file's requests are written back in the
file's own format. The originals are never touched, and copies are never fixed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence

from prefixcache.analyzer.canonical.rewrite import canonicalize_requests
from prefixcache.analyzer.canonical.writers import write_requests
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request


@dataclass(frozen=True, slots=True)
class FixedCopy:
    """One input file's copy: where it goes (``NAME.fixed.EXT`` beside the input; ``.jsonl``
    when the input has no suffix) and the canonical requests it holds, in input order."""

    source: str
    target: Path
    requests: tuple[Request, ...]

    def write(self, out: IO[bytes]) -> int:
        """Write the copy's requests to ``out`` in the input's own format; returns how many.
        Raises ConfigError for formats that cannot be written back (block traces,
        usage-only logs), naming ``canonicalize --to openai`` as the way out."""
        try:
            return write_requests(self.requests, out)
        except ConfigError as exc:
            raise ConfigError(f"--fix cannot write {Path(self.source).name} back in its own format ({exc}); "
                              "use prefixcache canonicalize --to openai") from None


def fixed_copies(paths: Sequence[str], input_format: str = "auto") -> list[FixedCopy]:
    """The copies ``lint --fix`` writes for ``paths``, one per input file holding requests
    (files named ``*.fixed.*`` are left out: a copy is never fixed again).

    Raises ConfigError for stdin (there is no place for a copy beside it).
    """
    if "-" in paths:
        raise ConfigError("--fix writes a copy beside each input file: it cannot take stdin (use canonicalize --out)")
    requests = [r for r in Ingest(paths, format=input_format) if ".fixed." not in Path(r.provenance.source).name]
    by_source: dict[str, list[Request]] = {}
    for req in canonicalize_requests(requests):
        by_source.setdefault(req.provenance.source, []).append(req)
    copies = []
    for source, reqs in by_source.items():
        src = Path(source)
        copies.append(FixedCopy(source, src.with_name(f"{src.stem}.fixed{src.suffix or '.jsonl'}"), tuple(reqs)))
    return copies
