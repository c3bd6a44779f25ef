"""The break markers' diff excerpts: ``prefixcache diff`` of each marked request against the
request lint judged it against.

For every ``lint --json`` request row that has findings and a ``compared_with`` request,
:func:`break_diffs` prepares both requests as lint does (the same reader, template and
tokenizer) and asks the diff library (:func:`~prefixcache.analyzer.lint.diff.diff_prepared`)
for its :class:`~prefixcache.analyzer.lint.diff.DiffReport`: the first divergent token, the
tokens either side (ids and decoded text of both prompts), the segment and JSON path, the
text around the first differing character. Each is kept as ``diff --json`` prints it, with
the command line that prints it. With ``redact`` the report holds no prompt text: the texts
become ``<N chars, h:HASH>`` (:func:`~prefixcache.analyzer.redact.redact_text`), the tokens
keep their position and id but lose their text, and the cause's quoted values are hashed.
"""

from __future__ import annotations

import shlex
from typing import Any, Sequence

import orjson

from prefixcache.analyzer.errors import PrefixcacheError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.diff import diff_prepared, redacted
from prefixcache.analyzer.lint.rules.trace import TRACE_DIVERGENCE
from prefixcache.analyzer.prepare import Preparer

#: Tokens shown either side of the first divergent token (``diff --window``), and characters of text (``--width``).
DIFF_WINDOW = 8
DIFF_WIDTH = 80


def diff_command(paths: Sequence[str], request: tuple[str, int], against: tuple[str, int],
                 flags: Sequence[tuple[str, str | None]], window: int, redact: bool = False) -> str:
    """The ``prefixcache diff ... --json`` command line printing one excerpt's document
    (``--redact`` with ``redact``: the same hashes under the same ``--redact-key``)."""
    args = ["prefixcache", "diff", *paths, "--request", f"{request[0]}:{request[1]}",
            "--against", f"{against[0]}:{against[1]}", "--json", *(["--redact"] if redact else [])]
    for flag, value in flags:
        if value not in (None, "", "auto"):
            args += [flag, value]
    if window != DIFF_WINDOW:
        args += ["--window", str(window)]
    return shlex.join(args)


def break_diffs(paths: Sequence[str], lint: dict[str, Any], input_format: str = "auto", template: str = "auto",
                tokenizer: str = "auto", redact: bool = False, window: int = DIFF_WINDOW) -> list[dict[str, Any]]:
    """One ``{"row", "command", "diff"}`` per marked request row of ``lint`` (a ``lint --json``
    document of ``paths``): its index in ``requests``, the diff command line and the
    ``diff --json`` document (redacted with ``redact``), in row order. Rows whose requests
    cannot be diffed (no prompt text: a block-hash trace's PC002) are left out; the logs are
    read until every request needed is found. InputError for unreadable logs."""
    marked = {(f["session"], f["request"]) for f in lint["findings"] if f["code"] != TRACE_DIVERGENCE.code}  # no text
    rows = [(i, r) for i, r in enumerate(lint["requests"])
            if (r["session"], r["index"]) in marked and r["compared_with"] and not r["usage_only"]]
    if not rows:
        return []
    wanted = {(r["session"], r["index"]) for _, r in rows} | {tuple(r["compared_with"]) for _, r in rows}
    requests = {}
    for q in Ingest(paths, format=input_format):  # read until every wanted request is found
        if (q.session, q.index) in wanted:
            requests[(q.session, q.index)] = q
            if len(requests) == len(wanted):
                break
    preparer = Preparer(template=template, tokenizer=tokenizer)
    prepared = {key: preparer.prepare(q) for key, q in requests.items()}
    flags = [("--input-format", input_format), ("--template", template), ("--tokenizer", tokenizer)]
    out = []
    for i, r in rows:
        a, b = prepared.get((r["session"], r["index"])), prepared.get(tuple(r["compared_with"]))
        if a is None or b is None:
            continue
        try:
            report = diff_prepared(a, b, preparer, window, DIFF_WIDTH)
        except PrefixcacheError:
            continue
        doc = orjson.loads(orjson.dumps(redacted(report) if redact else report))
        out.append({"row": i, "command": diff_command(paths, (r["session"], r["index"]), tuple(r["compared_with"]),
                                                      flags, window, redact), "diff": doc})
    return out
