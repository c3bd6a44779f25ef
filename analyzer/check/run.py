"""``prefixcache check`` as one library call, and its JSON document.

:func:`check_templates` validates the request (templates exist, at least one context,
fraction in [0, 1], known variations), loads tokenizer and contexts and checks every
template; :func:`template_record` is the typed object ``check --format json`` prints
per template (one JSON object a line; ``orjson.dumps(record)`` is the line).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from prefixcache.analyzer.check.checker import TemplateChecker, TemplateReport, TurnResult, load_context
from prefixcache.analyzer.check.document import (
    CheckFinding, ContextRecord, TemplateRecord, TurnRecord, VariationRecord,
)
from prefixcache.analyzer.check.vary import VARIATIONS
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.tokenize import get_tokenizer

#: Decimals of ``stable_fraction``.
DIGITS = 4


def template_record(r: TemplateReport) -> TemplateRecord:
    """The JSON object of one checked template."""
    contexts = [
        ContextRecord(c.context, c.total_tokens, c.stable_tokens, round(c.stable_fraction, DIGITS), c.boundary_tokens,
                      [VariationRecord(v.variation, v.changed_values, v.stable_tokens, v.first_diff_char,
                                       v.location.file if v.location else None,
                                       v.location.line if v.location else None, v.answered) for v in c.variants],
                      _turn_record(c.turn))
        for c in r.contexts
    ]
    return TemplateRecord(r.template, r.passed, r.tokenizer, r.boundary_line, contexts,
                          [CheckFinding(s.code, s.message, s.file, s.line) for s in r.static],
                          [CheckFinding(f.code, f.message, f.file, f.line) for f in r.failures])


def _turn_record(t: TurnResult | None) -> TurnRecord | None:
    if t is None:
        return None
    return TurnRecord(t.next, t.derived, t.prefix_tokens, t.shared_tokens, t.first_diff_char,
                      t.location.file if t.location else None, t.location.line if t.location else None, t.tail_tokens)


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """The options of ``check``: the JSON ``contexts`` (files, at least one), the tokenizer
    spec, the thresholds (``min_stable_tokens``: tokens; ``min_stable_fraction``: of the
    prompt, in [0, 1]), the variations (``vary``: ``all`` or comma-separated names of
    :data:`~prefixcache.analyzer.check.vary.VARIATIONS`), extra ``search_path`` folders for
    ``{% include %}``, the ``seed`` of regenerated ids, and ``first_line`` (False: a variation
    of the prompt's first line does not fail on its own). Checked by :func:`check_templates`."""

    contexts: tuple[str, ...] = ()
    tokenizer: str = "auto"
    min_stable_tokens: int = 0
    min_stable_fraction: float = 0.0
    vary: str = "all"
    search_path: tuple[str, ...] = ()
    seed: int = 0
    first_line: bool = True


def parse_variations(vary: str) -> list[str]:
    """``all`` or comma-separated variation names (unknown names are refused by the checker)."""
    return list(VARIATIONS) if vary == "all" else [v.strip() for v in vary.split(",") if v.strip()]


def check_templates(templates: Sequence[str], contexts: Sequence[str], tokenizer: str = "auto",
                    min_stable_tokens: int = 0, min_stable_fraction: float = 0.0, vary: str = "all",
                    search_path: Sequence[str] = (), seed: int = 0, first_line: bool = True) -> list[TemplateReport]:
    """Check every template against every context (files); one report per template, in order.
    ``first_line`` False stops a variation of the prompt's first line from failing on its own.

    Raises ConfigError before any work for a missing template (or a folder given as one), no
    context, a negative token count, a fraction outside [0, 1], a search path that is not an
    existing folder, an unknown variation or tokenizer; and for unreadable contexts, template
    syntax and render errors (naming file and line).
    """
    _check_request(templates, contexts, min_stable_tokens, min_stable_fraction, search_path)
    variations = parse_variations(vary)
    tok = get_tokenizer(tokenizer)
    loaded = [(c, load_context(c)) for c in contexts]
    return [TemplateChecker(t, tok, search_path, variations, seed, first_line).run(loaded, min_stable_tokens, min_stable_fraction)
            for t in templates]


def _check_request(templates: Sequence[str], contexts: Sequence[str], min_stable_tokens: int,
                   min_stable_fraction: float, search_path: Sequence[str]) -> None:
    """The option checks of :func:`check_templates` (ConfigError naming the option and value)."""
    folders = [t for t in templates if Path(t).is_dir()]
    if folders:
        raise ConfigError(f"{', '.join(folders)}: is a folder, not a template file; name the .jinja files")
    missing = [t for t in templates if not Path(t).is_file()]
    if missing:
        raise ConfigError(f"template not found: {', '.join(missing)}")
    if not contexts:
        raise ConfigError("check needs at least one --context CTX.json (a JSON object of template variables)")
    if min_stable_tokens < 0:
        raise ConfigError(f"--min-stable-tokens {min_stable_tokens}: expected a token count >= 0")
    if not 0.0 <= min_stable_fraction <= 1.0:
        raise ConfigError(f"--min-stable-fraction {min_stable_fraction}: expected a number between 0 and 1")
    for folder in search_path:
        if not Path(folder).is_dir():
            what = "is not a folder" if Path(folder).exists() else "does not exist"
            raise ConfigError(f"--search-path {folder}: {what} (give a folder of included templates)")
