"""Lint rules with permanent codes (``PCnnn``), the registry, and classification.

Groups (one module each): ``volatile`` PC1xx, ``tools`` PC2xx, ``serialization``
PC3xx, ``history`` PC4xx, ``template`` PC5xx, ``provider`` PC6xx; PC001
(unclassified) lives with the dispatcher in ``classify``, PC002 (a block-hash trace
diverged, cause unknown) in ``trace``. Codes are permanent and
never reused; :data:`ALIASES` maps retired codes or names to current codes.
Each rule has pass/fail cases in ``cases/PCnnn.json`` (package data).
"""

from __future__ import annotations

from prefixcache.analyzer.lint.rules import history, provider, serialization, template, tools, trace, volatile
from prefixcache.analyzer.lint.rules.base import SECTIONS, SEVERITIES, Finding, PairContext, Rule, severity_rank
from prefixcache.analyzer.lint.rules.classify import UNCLASSIFIED, classify
from prefixcache.analyzer.lint.rules import docs
from prefixcache.analyzer.lint.rules.docs import RuleDoc, rule_doc, rule_markdown

#: Every rule, ordered by code.
RULES: tuple[Rule, ...] = tuple(sorted(
    [UNCLASSIFIED, *trace.RULES, *volatile.RULES, *tools.RULES, *serialization.RULES, *history.RULES, *template.RULES, *provider.RULES],
    key=lambda r: r.code,
))
#: Code -> rule.
REGISTRY: dict[str, Rule] = {r.code: r for r in RULES}
#: Retired codes / names kept as aliases (none retired yet); names resolve too.
ALIASES: dict[str, str] = {}


def get_rule(code_or_name: str) -> Rule:
    """The rule for a code (``PC101``, case-insensitive) or name (``volatile-timestamp``).

    Raises KeyError naming the unknown code.
    """
    key = code_or_name.strip()
    key = ALIASES.get(key.upper(), ALIASES.get(key, key))
    if key.upper() in REGISTRY:
        return REGISTRY[key.upper()]
    for rule in RULES:
        if rule.name == key.lower():
            return rule
    raise KeyError(f"unknown rule {code_or_name!r}")


def rules_plain() -> list[str]:
    """Every rule as plain aligned text lines (header first; see :func:`.docs.plain_table`),
    a blank line, then the severity table (:func:`.docs.plain_severity_table`)."""
    return [*docs.plain_table(RULES), "", *docs.plain_severity_table(RULES)]


__all__ = ["ALIASES", "REGISTRY", "RULES", "SECTIONS", "SEVERITIES", "Finding", "PairContext", "Rule", "RuleDoc",
           "classify", "get_rule", "rule_doc", "rule_markdown", "rules_plain", "severity_rank"]
