"""``lint --fix``: a cache-stable copy of each input file, beside it (``NAME.fixed.EXT``).

The canonicalize engine (:func:`~prefixcache.analyzer.canonical.rewrite.canonicalize_requests`,
default options) rewrites every request; each file's requests are written back in the
file's own format. The originals are never touched, and copies are never fixed again.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence

from prefixcache.analyzer.canonical.rewrite import canonicalize_requests
from prefixcache.analyzer.canonical.writers import WRITABLE, NotWritableBack, write_requests
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
        Raises ConfigError for formats that cannot be written back, naming the whole
        command that writes an OpenAI Chat copy instead (``lint`` has no ``--to``)."""
        try:
            return write_requests(self.requests, out)
        except NotWritableBack as exc:
            copy = shlex.quote(str(self.target.with_suffix(".jsonl")))
            raise ConfigError(f"--fix cannot write {Path(self.source).name} back in its own format ({exc.format} "
                              f"logs cannot be written; writable: {', '.join(WRITABLE)}); write a fixed copy in "
                              f"OpenAI Chat JSONL instead with: prefixcache canonicalize {shlex.quote(self.source)} "
                              f"--to openai --out {copy}{_not_carried(self.requests)}") from None


def _not_carried(requests: Sequence[Request]) -> str:
    """What an OpenAI Chat copy of ``requests`` cannot carry, as a clause for :meth:`FixedCopy.write`'s
    message ("" when nothing): Anthropic ``cache_control`` marks (PC603 on the copy) and a hidden
    (unlogged) system prompt and tools (``extra["opaque_prefix_key"]``, Claude Code): the copy's
    reusable figure can then be lower than the original's (Claude Code sample: 96.8% → 94.4%)."""
    lost = []
    if any(m.cache_control for r in requests for m in r.messages) or \
            any(t.cache_control for r in requests for t in r.tools):
        lost.append("the cache_control marks")
    if any(isinstance(r.extra, dict) and r.extra.get("opaque_prefix_key") for r in requests):
        lost.append("the hidden (unlogged) system prompt and tools")
    if not lost:
        return ""
    return (f"; that copy cannot carry {' or '.join(lost)}, so its reusable figure can be lower than this log's: "
            "add --review to see both figures before writing")


def fixed_copies(paths: Sequence[str], input_format: str = "auto") -> list[FixedCopy]:
    """The copies ``lint --fix`` writes for ``paths``, one per input file holding requests
    (files named ``*.fixed.*`` are left out: a copy is never fixed again).

    Raises ConfigError for stdin (there is no place for a copy beside it), when every input
    is such an earlier copy, and for a file whose log holds no prompt text (a block-hash
    trace, a usage-only log): there is nothing to rewrite.
    """
    if "-" in paths:
        raise ConfigError("--fix writes a copy beside each input file: it cannot take stdin (use canonicalize --out)")
    every = list(Ingest(paths, format=input_format))
    requests = [r for r in every if ".fixed." not in Path(r.provenance.source).name]
    if every and not requests:
        raise ConfigError("--fix: every input is an earlier fixed copy (NAME.fixed.EXT), and copies are never "
                          "fixed again; fix the originals, or lint the copies without --fix")
    _require_prompt_text(requests)
    by_source: dict[str, list[Request]] = {}
    for req in canonicalize_requests(requests):
        by_source.setdefault(req.provenance.source, []).append(req)
    copies = []
    for source, reqs in by_source.items():
        src = Path(source)
        copies.append(FixedCopy(source, src.with_name(f"{src.stem}.fixed{src.suffix or '.jsonl'}"), tuple(reqs)))
    return copies


def _require_prompt_text(requests: Sequence[Request]) -> None:
    """ConfigError for the first input file none of whose requests holds prompt text (block-hash
    traces and usage-only logs keep only hashes or the provider's counts)."""
    with_text: dict[str, bool] = {}
    for req in requests:
        source = req.provenance.source
        with_text[source] = with_text.get(source, False) or (req.trace is None and bool(req.messages))
    for source, has_text in with_text.items():
        if not has_text:
            first = next(r for r in requests if r.provenance.source == source)
            kept = "block hashes (a block trace)" if first.trace is not None else "the provider's token counts"
            raise ConfigError(f"--fix: {Path(source).name} ({first.format}) holds no prompt text to rewrite, "
                              f"only {kept}; there is nothing to fix in it")
