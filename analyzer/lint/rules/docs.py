"""Every rule's documentation as data and text: the ``rules --json`` / ``rule --json``
document (:class:`RuleDoc`), one rule as Markdown (:func:`rule_markdown`, also what the
generated docs pages are made of), the rules table as plain text (:func:`plain_table`) and the
one severity table (code → severity → exit effect, :func:`severity_rows`) that ``prefixcache
rules`` prints and ``docs/rules/index.md`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixcache.analyzer.lint.rules.base import SECTIONS, TTL, Rule


@dataclass(frozen=True, slots=True)
class RuleDoc:
    """One rule as ``rules --json`` lists it: code, name, group, default severity, scope
    (``pair`` or ``request``), summary, fix, its five documentation sections, when its
    severity differs from the default (``severity_when``, "" when never) and its effect on
    ``lint``'s exit code (``exit_effect``, :func:`exit_effect`)."""

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
    severity_when: str
    exit_effect: str


def rule_doc(rule: Rule) -> RuleDoc:
    """The :class:`RuleDoc` of ``rule`` (sections from its docstring, :meth:`Rule.doc`)."""
    doc = rule.doc()
    return RuleDoc(rule.code, rule.name, rule.group, rule.severity, rule.scope, doc["summary"], rule.fix,
                   *(doc[sec] for sec in SECTIONS), rule.severity_when, exit_effect(rule))


#: What the severity table says first (docs/rules/index.md and ``prefixcache rules``).
SEVERITY_INTRO = ("`lint` exits 1 when a finding is at or above `--fail-on` (default `warning`): errors and warnings "
                  "fail CI, `info` never does unless `--fail-on info`. `severity = {PCnnn = \"info\"}` in "
                  "`[tool.prefixcache]` overrides a code's severity.")


def exit_effect(rule: Rule) -> str:
    """What a finding of ``rule`` does to ``lint``'s exit code under the default ``--fail-on
    warning`` (and where its ``severity_when`` lowers it to info or to no finding)."""
    effect = "exit 1" if rule.severity in ("error", "warning") else "exit 0 (1 with `--fail-on info`)"
    if rule.severity != "info" and "info" in rule.severity_when:
        effect += "; exit 0 where it is info"
    if "no finding" in rule.severity_when:
        effect += "; nothing (exit 0) where there is no finding"
    return effect


@dataclass(frozen=True, slots=True)
class SeverityRow:
    """One row of the severity table: ``code``, default ``severity``, when it differs, exit effect."""

    code: str
    severity: str
    differs_when: str
    exit_effect: str


def severity_rows(rules: tuple[Rule, ...]) -> list[SeverityRow]:
    """The one severity table: a row per rule, then the ``ttl`` loss cause (not a rule)."""
    rows = [SeverityRow(r.code, r.severity, r.severity_when or "-", exit_effect(r)) for r in rules]
    rows.append(SeverityRow(f"`{TTL}` (a loss cause, not a rule: `lint --ttl`)", "none", "-",
                            "nothing: no finding at any `--fail-on` (exit 0), and `--fail-under` counts its tokens "
                            "as reusable"))
    return rows


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
    return _aligned(rows)


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as aligned text: every column padded but the last, which is never cut."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]


def plain_severity_table(rules: tuple[Rule, ...]) -> list[str]:
    """The severity table (:func:`severity_rows`) as plain text: a title, the intro, the rows."""
    rows = [("code", "severity", "exit effect (default --fail-on warning)", "differs when")]
    rows += [(r.code.replace("`", ""), r.severity, r.exit_effect.replace("`", ""), r.differs_when.replace("`", ""))
             for r in severity_rows(rules)]
    return ["Severity (code -> severity -> exit effect)", SEVERITY_INTRO.replace("`", ""), *_aligned(rows)]
