"""Every rule's documentation as data and text: the ``rules --json`` / ``rule --json``
document (:class:`RuleDoc`), one rule as Markdown (:func:`rule_markdown`, also what the
generated docs pages are made of) and the rules table as plain text (:func:`plain_table`).
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixcache.analyzer.lint.rules.base import SECTIONS, Rule


@dataclass(frozen=True, slots=True)
class RuleDoc:
    """One rule as ``rules --json`` lists it: code, name, group, default severity, scope
    (``pair`` or ``request``), summary, fix, and its five documentation sections."""

    code: str
    name: str
    group: str
    severity: str
    scope: str
    summary: str
    fix: str
    what_it_does: str
    why_it_breaks_caching: str
    example: str
    use_instead: str
    fix_safety: str


def rule_doc(rule: Rule) -> RuleDoc:
    """The :class:`RuleDoc` of ``rule`` (sections from its docstring, :meth:`Rule.doc`)."""
    doc = rule.doc()
    return RuleDoc(rule.code, rule.name, rule.group, rule.severity, rule.scope, doc["summary"], rule.fix,
                   *(doc[sec] for sec in SECTIONS))


def rule_markdown(rule: Rule, level: int = 3) -> str:
    """One rule's documentation as Markdown, headed at ``level`` (``###`` by default)."""
    doc = rule.doc()
    scope = "single request" if rule.scope == "request" else "pair of requests"
    out = [f"{'#' * level} {rule.code} `{rule.name}`", "",
           f"{doc['summary']} *(group {rule.group}, default severity {rule.severity}, {scope})*", ""]
    for sec in SECTIONS:
        body = doc[sec]
        if sec == "Example":
            out += [f"**{sec}:**", "", "```", body, "```", ""]
        else:
            out += [f"**{sec}:** {' '.join(body.split())}", ""]
    return "\n".join(out)


def plain_table(rules: tuple[Rule, ...]) -> list[str]:
    """The rules table as plain aligned text (pipes, CI logs): a header, then one line per
    rule, nothing cut, no box drawing, no trailing spaces."""
    rows = [("code", "name", "group", "severity", "scope", "finds")]
    rows += [(r.code, r.name, r.group, r.severity, r.scope, r.doc()["summary"]) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[5] for row in rows]
