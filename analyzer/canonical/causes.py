"""What lint says of what ``canonicalize`` wrote: every break left, named by lint itself.

``canonicalize`` has no classifier of its own (issue 24: one cause vocabulary). The
rewritten requests are linted by :class:`~prefixcache.analyzer.lint.engine.Linter` (the
same preparer, arrival order and pair rules as ``prefixcache lint``), and every break lint
still finds in them (what the rewrite could not or was told not to repair) is listed as a
*reported* transformation (``applied=False``) with lint's code, message and JSON path. So
lint, ``diff`` and ``canonicalize`` give one code for one break, and a break canonicalize
reports is one ``prefixcache lint`` of the written log reports too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, Sequence

from prefixcache.analyzer.cache.simulate.reuse import Reuse, reuse_with_probes

from prefixcache.analyzer.canonical.rewrite import CanonicalOptions, Canonicalized, Transformation, canonicalize_all
from prefixcache.analyzer.lint.engine import Linter, RequestResult
from prefixcache.analyzer.lint.rules import REGISTRY, Finding
from prefixcache.analyzer.model import Request
from prefixcache.analyzer.prepare import Prepared, Preparer
from prefixcache.analyzer.sequence import arrival_order


def lint_results(requests: Iterable[Request], template: str = "auto", tokenizer: str = "auto"
                 ) -> dict[tuple[str, int], RequestResult]:
    """Lint ``requests`` as ``prefixcache lint`` does (one :class:`Preparer`, the one arrival
    order): (session, index) → lint's :class:`RequestResult` (figures in tokens, findings).
    Raises ConfigError for unusable template / tokenizer specs."""
    preparer = Preparer(template=template, tokenizer=tokenizer)
    feed, out = _linting(preparer)
    for _, r in arrival_order(list(requests), lambda r: r.timestamp):
        feed(preparer.prepare(r))
    return out


def _linting(preparer: Preparer) -> tuple[Callable[[Prepared], Prepared], dict[tuple[str, int], RequestResult]]:
    """A linter over ``preparer``'s requests: (feed one prepared request, returning it;
    the results so far by (session, index))."""
    linter = Linter(render=lambda r: preparer.pipeline(r.model).renderer.render(r))
    out: dict[tuple[str, int], RequestResult] = {}

    def feed(p: Prepared) -> Prepared:
        res = linter.feed(p)
        out[(res.session, res.index)] = res
        return p

    return feed, out


def lint_and_reuse(requests: Sequence[Request], template: str = "auto", tokenizer: str = "auto"
                   ) -> tuple[dict[tuple[str, int], RequestResult], list[Reuse]]:
    """:func:`lint_results` and :func:`~prefixcache.analyzer.cache.simulate.reuse.reuse` of the
    same ``requests`` with each request prepared once: the reuse pass prepares them in input
    order and the linter takes each in the one arrival order, holding only those prepared before
    their turn (none when the two orders agree). Same figures as the two calls (a preparer gives
    the same ids in either order); raises ConfigError as they do."""
    requests = list(requests)
    order = [pos for _, (pos, _) in arrival_order(list(enumerate(requests)), lambda pr: pr[1].timestamp)]
    preparer = Preparer(template=template, tokenizer=tokenizer)
    feed, out = _linting(preparer)
    held: dict[int, Prepared] = {}
    turn = 0

    def prepare(r: Request) -> Prepared:
        nonlocal turn
        p = preparer.prepare(r)
        held[len(held) + turn] = p  # input position: those fed so far plus those held
        while turn < len(order) and order[turn] in held:
            feed(held.pop(order[turn]))
            turn += 1
        return p

    figures, _ = reuse_with_probes(requests, {}, template, tokenizer, prepare=prepare)
    return out, figures


def break_findings(result: RequestResult | None) -> list[Finding]:
    """The findings of ``result`` that explain a break (pair rules, PC001 included), primary first."""
    if result is None:
        return []
    return [f for f in result.findings if f.code in REGISTRY and REGISTRY[f.code].scope == "pair"]


def with_lint_causes(results: Sequence[Canonicalized], lint: dict[tuple[str, int], RequestResult]
                     ) -> list[Canonicalized]:
    """``results`` with the breaks lint finds in the rewritten requests (``lint``: lint's
    results of ``[c.request for c in results]``) added as reported transformations."""
    out = []
    for c in results:
        reported = [Transformation(f.code, f.message, f.json_path or f.segment, applied=False)
                    for f in break_findings(lint.get((c.request.session, c.request.index)))]
        out.append(replace(c, transformations=(*c.transformations, *reported)) if reported else c)
    return out


#: The rewrites that move a volatile value out of the prefix (clock, id, per-user value).
VOLATILE_MOVES = ("PC101", "PC102", "PC104")


def lint_codes(results: Sequence[Canonicalized], original: dict[tuple[str, int], RequestResult]
               ) -> dict[tuple[str, int, str], str]:
    """``(session, index, rewrite code)`` → the code lint gives the break that rewrite repairs,
    where it is not the rewrite's own (issue 24: one code for one break in every command).

    One case: a volatile value moved out of the prefix (:data:`VOLATILE_MOVES`) that is the same
    in every request of its session breaks no request of its session; it breaks only the prefix
    the sessions share, which lint names PC602 (``cross-session-prefix``) at that JSON path. So
    where lint of the ``original`` requests (:func:`lint_results`) finds PC602 at a path, a move
    at that path whose value (its description) never changes within its session is PC602 too.
    A value that changes within its session (a clock) keeps its own code."""
    paths = {f.json_path for r in original.values() for f in r.findings if f.code == "PC602" and f.json_path}
    if not paths:
        return {}
    values: dict[tuple[str, str, str], set[str]] = {}
    for c in results:
        for t in c.transformations:
            if t.applied and t.code in VOLATILE_MOVES and t.json_path in paths:
                values.setdefault((c.original.session, t.code, t.json_path), set()).add(t.description)
    return {(c.original.session, c.original.index, t.code): "PC602" for c in results for t in c.transformations
            if t.applied and len(values.get((c.original.session, t.code, t.json_path), ())) == 1}


def canonicalize_explained(requests: Sequence[Request], options: CanonicalOptions = CanonicalOptions(),
                           template: str = "auto", tokenizer: str = "auto") -> list[Canonicalized]:
    """:func:`~prefixcache.analyzer.canonical.rewrite.canonicalize_all` with lint's unrepaired
    breaks left in the rewritten requests reported (:func:`with_lint_causes`): what
    ``prefixcache canonicalize`` lists.
    Raises ConfigError for unusable template / tokenizer specs."""
    results = canonicalize_all(requests, options, steps=True)
    return with_lint_causes(results, lint_results([c.request for c in results], template, tokenizer))
