"""Rewrites as reviewable change sets: what ``canonicalize --review`` shows before anything is written.

One :class:`ChangeSet` per rewritten request: the rules applied (codes), a unified diff of every
field the rewrite changed (message and system texts, the tool order, tool-call arguments), the
tokens the rewrite recovers for that request (reusable after − before, tokens of the run's
tokenizer), and whether the structure check passed on every changed text
(:func:`~prefixcache.analyzer.canonical.structure.structure_changes`); and the same per rule
(:class:`RuleChange`) when one request has several: each rule's diff is the change from the
request with the rules before it applied to the request with it applied too
(:attr:`~prefixcache.analyzer.canonical.rewrite.Canonicalized.steps`), its tokens the reuse it
adds, measured against the same cache (the rewritten earlier requests). What the rewrites of
*earlier* requests change for this one (its predecessors now match, or no longer do) is its own
figure, ``context_tokens``, so the rules' figures and it sum to the request's.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Mapping, Sequence

from prefixcache.analyzer.cache.simulate.reuse import Reuse
from prefixcache.analyzer.canonical.rewrite import Canonicalized
from prefixcache.analyzer.canonical.structure import structure_changes
from prefixcache.analyzer.model import Request

#: Context lines around each change in the diffs.
CONTEXT_LINES = 1


@dataclass(frozen=True, slots=True)
class RuleChange:
    """One rule's part of a request's rewrite: its ``code``, the unified ``diff`` it makes (on
    top of the rules before it), the reusable tokens it adds (``recovered_tokens``; negative when
    it costs reuse) and its structure check."""

    code: str
    diff: list[str]
    recovered_tokens: int
    structure_ok: bool
    structure_problems: list[str]


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """The rewrite of one request: its place (file, record, session, index), the ``codes``
    applied, the ``diff`` (unified diff lines, ``--- logged`` / ``+++ rewritten`` per field),
    ``recovered_tokens`` (reusable tokens after − before for this request; negative when the
    rewrite costs reuse, e.g. a value appended to the newest turn) and ``structure_ok`` with
    the ``structure_problems`` found (none when it passed); ``rules``: the same per rule, in the
    order applied, and ``context_tokens``: the reuse this request gains (or loses) from the
    rewrites of earlier requests alone (``recovered_tokens`` = ``context_tokens`` + the rules')."""

    source: str
    record: int
    session: str
    index: int
    codes: list[str]
    diff: list[str]
    recovered_tokens: int
    structure_ok: bool
    structure_problems: list[str]
    rules: list[RuleChange]
    context_tokens: int


def _field_diff(name: str, before: str, after: str) -> list[str]:
    return [ln.rstrip("\n") for ln in difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"logged {name}", f"rewritten {name}",
        n=CONTEXT_LINES)]


def request_diff(original: Request, rewritten: Request) -> tuple[list[str], list[str]]:
    """(unified diff lines, structure problems) of every field the rewrite changed."""
    diff, problems = [], []
    for i, (a, b) in enumerate(zip(original.messages, rewritten.messages)):
        name = a.path or f"messages[{i}]"
        if a.content != b.content:
            diff += _field_diff(f"{name}.content", a.content, b.content)
            problems += [f"{name}: {p}" for p in structure_changes(a.content, b.content)]
        for j, (x, y) in enumerate(zip(a.tool_calls, b.tool_calls)):
            if x.arguments != y.arguments:
                diff += _field_diff(f"{name}.tool_calls[{j}].function.arguments", x.arguments, y.arguments)
    names = ["\n".join(t.name for t in r.tools) for r in (original, rewritten)]
    if names[0] != names[1]:
        diff += _field_diff("tools (names, in order)", names[0] + "\n", names[1] + "\n")
    by_name = {t.name: t for t in original.tools}
    for u in rewritten.tools:
        t = by_name.get(u.name)
        if t is not None and json.dumps(t.schema) != json.dumps(u.schema):
            diff.append(f"~ tools[{u.name}]: JSON-schema key order changed, same value")
    return diff, problems


def rewritten(results: Sequence[Canonicalized]) -> dict[int, list[Request]]:
    """Per rewritten request (position in ``results``): the versions whose reuse the change
    sets need besides the rewritten one: the logged request, then every per-rule step but the
    last (the last is the rewritten request)."""
    return {n: [c.original, *(req for _, req in c.steps[:-1])] for n, c in enumerate(results) if c.steps}


def change_sets(results: Sequence[Canonicalized], before: Sequence[Reuse], after: Sequence[Reuse],
                probes: Mapping[int, Sequence[Reuse]]) -> list[ChangeSet]:
    """One :class:`ChangeSet` per request the rewrite changed (input order); ``before`` and
    ``after`` are the requests' reuse figures, in the same order as ``results``, and ``probes``
    the reuse of the versions :func:`rewritten` lists, against the rewritten cache
    (:func:`~prefixcache.analyzer.cache.simulate.reuse.reuse_with_probes`). Results without
    steps (``canonicalize_all(steps=False)``) get one rule row for all their codes."""
    out = []
    for n, (c, b, a) in enumerate(zip(results, before, after)):
        codes = list(dict.fromkeys(t.code for t in c.transformations if t.applied))
        if not codes:
            continue
        diff, problems = request_diff(c.original, c.request)
        versions = [c.original, *(req for _, req in c.steps)] if c.steps else [c.original, c.request]
        figures = [r.reusable_tokens for r in probes.get(n, ())] + [a.reusable_tokens]
        if len(figures) != len(versions):  # no probes: the whole change is one step
            figures = [b.reusable_tokens] * (len(versions) - 1) + [a.reusable_tokens]
        rules = []
        for k, code in enumerate([code for code, _ in c.steps] or [", ".join(codes)]):
            d, p = request_diff(versions[k], versions[k + 1])
            rules.append(RuleChange(code, d, figures[k + 1] - figures[k], not p, p))
        place = c.original.provenance
        out.append(ChangeSet(place.source, place.record, c.original.session, c.original.index, codes, diff,
                             a.reusable_tokens - b.reusable_tokens, not problems, problems, rules,
                             figures[0] - b.reusable_tokens))
    return out
