"""Options every command shares, declared once (typer ``Annotated`` types).

Names mean one thing everywhere: ``--format`` is the *output* format (``--json`` its
shorthand), ``--input-format`` the log reader, ``--tokenizer`` the tokenizer,
``--template`` the chat template, ``--model`` the engine model (replay), and
``--capacity`` one grammar (see :func:`prefixcache.analyzer.cache.capacity.parse_capacity`).
Counts that make no sense (a block size of 0, a negative TTL) are refused by click
before any work, as usage errors (exit 2).

Old spellings stay for one release as hidden options (:func:`deprecated_alias`):
they still work and print one warning naming the new spelling.

Every flag that two commands share is declared here, once; where its help must say
something per command (``--format``'s choices, ``--policy``'s default), a small factory
builds the declaration. Commands map the flags to their library ``*Options``
(:mod:`prefixcache.analyzer.api`) and nothing else: redaction, for one, is decided in the
library from ``redact`` / ``redact_key`` (:func:`implied_redact` only reads the flags).
"""

from __future__ import annotations

from typing import Annotated, Optional, TypeVar

import os

import typer

from prefixcache.analyzer.cache.models import CACHES
from prefixcache.analyzer.redact import KEY_ENV
from prefixcache.cli.common import err
from prefixcache.cli.usage import UsageError, get_current_context

T = TypeVar("T")

Paths = Annotated[list[str], typer.Argument(
    help="Log files, directories (recursive), globs, or - for stdin.", show_default=False)]
InputFormat = Annotated[str, typer.Option(
    "--input-format", help="Log reader (see docs/formats.md); default: detect per file.")]
Tokenizer = Annotated[str, typer.Option(
    "--tokenizer", help="Tokenizer: auto, a tiktoken encoding, smollm2, deepseek, a HF folder or a GGUF file.")]
Template = Annotated[str, typer.Option(
    "--template", help="Chat template: auto, tokenizer, chatml_tools, provider:openai|openai-harmony|anthropic|deepseek, or a .jinja file.")]
SkipBad = Annotated[bool, typer.Option(
    "--skip-bad", help="Report unreadable records and go on instead of exit 2.")]
AsJson = Annotated[bool, typer.Option("--json", help="Shorthand for --format json.")]
Executor = Annotated[str, typer.Option(
    "--executor", help="Where render and tokenize run: local (serial), ray (all local cores, or the cluster in "
    "RAY_ADDRESS) or ray:ADDRESS (a Ray cluster); the output is the same. Needs prefixcache[ray].")]


def block_size_option(help: str, default_note: bool = True):
    """``--block-size N`` (tokens, ≥ 1): optional (None = the command's default) unless
    ``default_note`` is False, where the command gives an int default of its own."""
    return Annotated[Optional[int] if default_note else int, typer.Option("--block-size", min=1, help=help)]


BlockSize = block_size_option("Block (page) size in tokens; default per cache: vLLM 16, SGLang 1.")
LintBlockSize = block_size_option("Block size for the block-aligned figure (tokens, default 16).")
ReplayBlockSize = block_size_option("KV block size in tokens (vLLM's default).", default_note=False)


def capacity_option(help: str):
    """``--capacity`` (one grammar, :func:`prefixcache.analyzer.cache.capacity.parse_capacity`), None
    when not given; ``help`` says what this command's percentage and bytes are of."""
    return Annotated[Optional[str], typer.Option("--capacity", help=help)]


Capacity = capacity_option("Cache capacity: 5% (of unique blocks), 4000blocks, 2Mtok, 16GiB (KV bytes); "
                           "comma-separated for a sweep. Default: unbounded.")
ReplayCapacity = capacity_option(
    "KV cache capacity: 256MiB (KV bytes, by the model's KV bytes per token), 4000blocks, 2Mtok, or 5% "
    "(of the distinct blocks of the original prompts as replayed). Default: unbounded.")
Cache = Annotated[str, typer.Option("--cache", help=f"Cache model: {', '.join(CACHES)}.")]
ReportCache = Annotated[str, typer.Option("--cache", help="Cache model: auto (the logged model's provider, else vllm), "
                                                          f"{', '.join(CACHES)}.")]
KvModel = Annotated[Optional[str], typer.Option(
    "--kv-model", help="KV size preset for byte capacities (llama-3-8b, llama-3-70b, qwen2.5-7b, ...).")]
Force = Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")]
#: ``--ttl SECONDS``: idle expiry on the logical clock. ``simulate`` expires cache entries with it;
#: ``lint`` (:data:`LintTtl`) also takes ``provider`` (the logged model's provider default).
Ttl = Annotated[Optional[float], typer.Option(
    "--ttl", min=0.0, help="Expire entries idle longer than this (seconds, logical clock; ≥ 0).")]
LintTtl = Annotated[Optional[str], typer.Option(
    "--ttl", metavar="SECONDS|provider",
    help="Idle TTL: a prefix idle longer than this since the session's previous request is lost to "
         "ttl (seconds, logged clock; provider: the model's provider default, none for engines). Default: off.")]
Config = Annotated[Optional[str], typer.Option(
    "--config", help="Lint config file (default: prefixcache.toml or [tool.prefixcache] in pyproject.toml).")]
Redact = Annotated[bool, typer.Option(
    "--redact", help="Show lengths and keyed hashes instead of prompt text, in the output, errors and skip reasons.")]
#: ``--redact/--no-redact`` for the commands a config file configures (``redact = true``): None = not given.
RedactOrNot = Annotated[Optional[bool], typer.Option(
    "--redact/--no-redact",
    help="Show lengths and keyed hashes instead of prompt text, in the output, errors and skip reasons.")]
RedactKey = Annotated[Optional[str], typer.Option(
    "--redact-key", envvar=KEY_ENV, show_envvar=True,
    help="Key for --redact hashes, to compare them across runs and commands (default: a random key per run).")]


def format_option(help: str, *short: str, metavar: str | None = None):
    """``--format NAME`` (the output format; ``short``: e.g. ``-f``; ``metavar``: the value's
    name in ``--help``, default FORMAT), None when not given: :func:`output_format` resolves
    it with ``--json``."""
    return Annotated[Optional[str], typer.Option("--format", *short, help=help, metavar=metavar)]


def rate_option(help: str, minimum: float | None = None):
    """``--rate R`` (requests/s; ``minimum``: the least value click accepts), None when not given."""
    return Annotated[Optional[float], typer.Option("--rate", min=minimum, help=help)]


def policy_option(help: str, optional: bool = False):
    """``--policy`` (eviction policies, comma-separated); ``optional``: None when not given."""
    return Annotated[Optional[str] if optional else str, typer.Option("--policy", help=help)]


def seed_option(help: str):
    """``--seed N``: the seed of a command's one random choice, named in ``help``."""
    return Annotated[int, typer.Option("--seed", help=help)]


def out_option(help: str, *short: str, required: bool = False):
    """``--out FILE`` (``short``: e.g. ``-o``): required, or None when not given."""
    return Annotated[str if required else Optional[str], typer.Option("--out", *short, help=help)]


def implied_redact(on: bool | None, key: str | None) -> bool | None:
    """``--redact`` as given (``on``: None when not given), or True when a ``--redact-key``
    was given without it (a key means hashes are wanted). An explicit ``--no-redact``
    (False) wins, and a key that only comes from ``$PREFIXCACHE_REDACT_KEY`` turns nothing
    on (it only keys the hashes)."""
    if on is not None or not key or key == os.environ.get(KEY_ENV):
        return on
    return True


# Hidden, deprecated spellings (one release): see deprecated_alias.
ModelAsTokenizer = Annotated[Optional[str], typer.Option("--model", hidden=True)]


def deprecated_alias(old: str, new: str, old_value: T | None, value: T) -> T:
    """``value`` of the new option, or ``old_value`` of its deprecated spelling ``old`` when that
    was given (with one warning on stderr naming ``new``). Both given with different values is a
    usage error (exit 2): "--model and --tokenizer contradict each other; give --tokenizer".
    ``old`` / ``new`` are what the user typed (``--format openai-chat``): their first words name
    the options."""
    if old_value is None:
        return value
    flag = new.split()[0]
    if old_value != value and _given(flag):
        given = f"{flag} {value}" if " " in new else flag  # as typed: --input-format anthropic-messages
        raise UsageError(f"{old} and {given} contradict each other; give {flag}", _context())
    err.print(f"[yellow]warning:[/] {old} is deprecated and will be removed; use {new}", highlight=False)
    return old_value


def _context():
    """The running command's click context (None outside a command, e.g. in a unit test)."""
    return get_current_context(silent=True)


def _given(flag: str) -> bool:
    """Whether option ``flag`` (``--tokenizer``) was given on the command line or by its
    environment variable, not left at its default (click's parameter source)."""
    ctx = _context()
    if ctx is None:
        return False
    for param in ctx.command.params:
        if flag in getattr(param, "opts", ()):
            source = ctx.get_parameter_source(param.name)
            return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")
    return False


def output_format(fmt: str | None, as_json: bool, allowed: tuple[str, ...], default: str) -> str:
    """The output format from ``--format`` and the ``--json`` shorthand; ``typer.BadParameter``
    (exit 2) for an unknown format or a contradiction."""
    if fmt is not None and fmt not in allowed:
        raise typer.BadParameter(f"{fmt!r}: choose one of {', '.join(allowed)}", param_hint="--format")
    if as_json and fmt not in (None, "json"):
        raise typer.BadParameter(f"--json and --format {fmt} contradict each other; give one", param_hint="--format")
    return "json" if as_json else (fmt or default)
