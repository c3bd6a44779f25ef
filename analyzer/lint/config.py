"""Lint configuration: ``[tool.prefixcache]`` in pyproject.toml, or prefixcache.toml.

Lookup (first found wins): an explicit ``--config`` file; else, from the working
directory upwards, the first directory holding ``prefixcache.toml`` (keys at top
level) or a ``pyproject.toml`` with a ``[tool.prefixcache]`` table. Command-line
options override the file. Keys (``-`` and ``_`` are interchangeable):

=================  ===========  ================================================
key                type         meaning
=================  ===========  ================================================
``block-size``     int ≥ 1      block size (tokens) of the block-aligned figure
``select``         [str]        rule codes, prefixes, names or groups to enable
                               (default all)
``ignore``         [str]        rule codes, prefixes, names or groups to disable
``fail-under``     fraction     exit 1 when reusable/prompt tokens is below this
                               (``0.8``, or a percentage string ``"80%"``)
``fail-on``        str          lowest severity that makes findings exit 1
``severity``       {code: str}  per-rule severity overrides (known rule codes)
``format``         str          rich, text, json, sarif or github
``redact``         bool         lengths and hashes instead of prompt text
``template``       str          chat template spec (see ``inspect``)
``tokenizer``      str          tokenizer spec
``ttl``            seconds or   idle TTL: misses after a longer idle gap are lost
                   "provider"   to ``ttl`` (default: none; ``parse_ttl``)
=================  ===========  ================================================

Sub-tables (``[tool.prefixcache.simulate]`` ...) belong to other commands and are
ignored here. Unknown keys and wrong types raise :class:`ConfigError` naming the
file and the key.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.lint.rules import REGISTRY, SEVERITIES
from prefixcache.analyzer.render.files import not_text

FORMATS = ("rich", "text", "json", "sarif", "github")


@dataclass(frozen=True, slots=True)
class LintConfig:
    """Effective lint settings; ``source`` is the file they came from ("" = defaults)."""

    block_size: int = DEFAULT_BLOCK_SIZE
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fail_under: float | None = None
    fail_on: str = "warning"
    severity: Mapping[str, str] = field(default_factory=dict)
    format: str = "rich"
    redact: bool = False
    template: str = "auto"
    tokenizer: str = "auto"
    ttl: float | str | None = None
    source: str = ""

    def merged(self, **overrides: Any) -> "LintConfig":
        """A copy with every non-None override applied (command-line options), validated."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        return _validate(dataclasses.replace(self, **changes), self.source or "command line")


def parse_fraction(value: Any, where: str = "fail-under") -> float:
    """A fraction in [0, 1] from ``0.8``, ``"0.8"``, ``"80%"`` or ``"80 %"``.

    Raises ConfigError (naming ``where``) for anything else, including ``80``
    without a percent sign (ambiguous: give ``80%`` or ``0.8``).
    """
    if isinstance(value, bool):
        raise ConfigError(f"{where}: must be a fraction (0.8) or a percentage (80%), got {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        percent = text.endswith("%")
        try:
            number = float(text[:-1].strip() if percent else text)
        except ValueError:
            raise ConfigError(f"{where}: must be a fraction (0.8) or a percentage (80%), got {value!r}") from None
        if percent:
            number /= 100
    else:
        raise ConfigError(f"{where}: must be a fraction (0.8) or a percentage (80%), got {value!r}")
    if not 0 <= number <= 1:
        raise ConfigError(f"{where}: must be between 0 and 1 (or 0% and 100%), got {value!r}")
    return number


#: ``ttl = "provider"``: each request's hosted provider's default retention
#: (:func:`~prefixcache.analyzer.lint.rules.provider.provider_ttl`), none for engines.
PROVIDER_TTL = "provider"


def parse_ttl(value: Any, where: str = "ttl") -> float | str | None:
    """The idle TTL of ``lint --ttl``: seconds (a number ≥ 0, or its string: ``300``,
    ``"300"``), :data:`PROVIDER_TTL` (the logged model's provider default), or None (off: no
    ``ttl`` loss). ConfigError (naming ``where``) for anything else."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == PROVIDER_TTL:
        return PROVIDER_TTL
    if isinstance(value, bool):
        number = None
    elif isinstance(value, (int, float)):
        number = float(value)
    else:
        try:
            number = float(str(value).strip().removesuffix("s"))
        except ValueError:
            number = None
    if number is None or not number >= 0 or number == float("inf"):
        raise ConfigError(f"{where}: must be seconds >= 0 (300) or {PROVIDER_TTL!r}, got {value!r}")
    return number


def _validate(cfg: LintConfig, where: str) -> LintConfig:
    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"{where}: {key}: {why}")
    if not isinstance(cfg.block_size, int) or isinstance(cfg.block_size, bool) or cfg.block_size < 1:
        raise bad("block-size", f"must be an integer >= 1, got {cfg.block_size!r}")
    if cfg.fail_under is not None and not isinstance(cfg.fail_under, float):
        cfg = dataclasses.replace(cfg, fail_under=parse_fraction(cfg.fail_under, f"{where}: fail-under"))
    elif cfg.fail_under is not None:
        parse_fraction(cfg.fail_under, f"{where}: fail-under")
    if cfg.fail_on not in SEVERITIES:
        raise bad("fail-on", f"must be one of {', '.join(SEVERITIES)}, got {cfg.fail_on!r}")
    if cfg.format not in FORMATS:
        raise bad("format", f"must be one of {', '.join(FORMATS)}, got {cfg.format!r}")
    if cfg.ttl is not None:
        cfg = dataclasses.replace(cfg, ttl=parse_ttl(cfg.ttl, f"{where}: ttl"))
    for key in ("select", "ignore"):
        value = getattr(cfg, key)
        if not all(isinstance(v, str) for v in value):
            raise bad(key, "must be a list of rule codes, names or groups")
    for code, sev in cfg.severity.items():
        if code not in REGISTRY:
            raise bad(f"severity.{code}", "not a rule code (prefixcache rules lists them)")
        if sev not in SEVERITIES:
            raise bad(f"severity.{code}", f"must be one of {', '.join(SEVERITIES)}, got {sev!r}")
    return cfg


_KEYS = {f.name for f in dataclasses.fields(LintConfig)} - {"source"}


def from_mapping(table: Mapping[str, Any], where: str) -> LintConfig:
    """A :class:`LintConfig` from a TOML table (``where`` names it in errors)."""
    values: dict[str, Any] = {}
    for raw, value in table.items():
        key = raw.replace("-", "_")
        if key not in _KEYS:
            if isinstance(value, Mapping):
                continue  # another command's sub-table
            raise ConfigError(f"{where}: unknown key {raw!r} (known: {', '.join(sorted(k.replace('_', '-') for k in _KEYS))})")
        if key in ("select", "ignore"):
            value = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, list) else value
        if key == "severity" and not isinstance(value, Mapping):
            raise ConfigError(f"{where}: severity: must be a table of code = severity")
        if key == "severity":
            value = {str(k).upper(): v for k, v in value.items()}
        values[key] = value
    return _validate(LintConfig(**values, source=where), where)


def _read(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(not_text(path, "config file (TOML)", exc)) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def find_config(start: Path) -> Path | None:
    """The first ``prefixcache.toml`` or pyproject.toml with ``[tool.prefixcache]``
    from ``start`` upwards, or None."""
    for folder in (start, *start.parents):
        own = folder / "prefixcache.toml"
        if own.is_file():
            return own
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and "prefixcache" in _read(pyproject).get("tool", {}):
            return pyproject
    return None


def load_config(explicit: str | Path | None = None, start: str | Path | None = None) -> LintConfig:
    """Load lint settings (see module doc); defaults when no file is found.

    Raises ConfigError for a missing explicit file, invalid TOML, unknown keys or
    bad values.
    """
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
    else:
        path = find_config(Path(start) if start is not None else Path.cwd())
        if path is None:
            return LintConfig()
    data = _read(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("prefixcache")
        if table is None:
            raise ConfigError(f"{path}: no [tool.prefixcache] table")
        return from_mapping(table, f"{path} [tool.prefixcache]")
    return from_mapping(data, str(path))
