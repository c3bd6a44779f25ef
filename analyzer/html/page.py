"""The report page: Jinja2 templates, plotly figures and plotly.js, in one offline HTML file.

:func:`render_html` turns :class:`~.content.ReportDocuments` into the page. Every figure on
it is one of the documents' values, formatted (``1,234``, ``12.5%``) by the template's
filters; the documents themselves are embedded as JSON (``<script type="application/json"
id="doc-lint">`` …) (``<``, ``>``, ``&`` as ``\\u003c`` escapes) so a reader or a test can check the page against the commands it
names. plotly.js (the copy the installed plotly package ships) is inlined gzip-compressed
and base64-encoded (4.8 MB → about 1.9 MB); a few lines of script unpack it with the
browser's ``DecompressionStream`` and call ``Plotly.newPlot`` on each embedded figure.
Nothing is fetched from the network. A break marker's findings come with the diff
library's excerpt of the request against the one lint compared it with (``diff --json``,
:mod:`.excerpts`). With ``redact`` the page holds no prompt text: the findings' excerpts are
lint's lengths and hashes, the diff excerpts token ids and hashed texts, and replay rows lose
``output_ids``.
"""

from __future__ import annotations

import base64
import gzip
from functools import lru_cache
from importlib import resources
from typing import Any

import orjson
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from prefixcache import __version__
from prefixcache.analyzer.html import charts, reuse_time
from prefixcache.analyzer.html.content import ReportDocuments
from prefixcache.analyzer.html.bounded import CHARTED_SESSIONS

#: Optional keys of a simulate document (older or newer releases may lack them) and of its
#: result rows, with the value the page reads when one is absent.
SIMULATE_DEFAULTS: dict[str, Any] = {"report_bounded": None, "unique_blocks": None, "kv_bytes_per_token": None, "calls": [], "agreement": None,
                                     "cost": None, "usage_only_requests": 0, "reported": None, "tokenizers": {}}
ROW_DEFAULTS: dict[str, Any] = {"ttl_s": None, "capacity_tokens": None, "capacity_bytes": None, "cached_tokens": None,
                                "hit_ratio_tokens": None, "ideal_hit_ratio": None, "fraction_of_ideal": None,
                                "lost_tokens_by_cause": {}}

#: Sessions charted one by one (the largest first); the rest are in the sessions table.
MAX_SESSION_CHARTS = CHARTED_SESSIONS


@lru_cache(maxsize=1)
def plotly_js_packed() -> str:
    """plotly.min.js of the installed plotly package, gzip-compressed, base64 (ASCII)."""
    from plotly.offline import get_plotlyjs

    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode("ascii")


def _json_island(value: Any) -> Markup:
    """``value`` (a JSON value, or JSON text already) as JSON safe inside ``<script>``: ``<``, ``>``
    and ``&`` (only ever inside JSON strings) become ``\\u003c`` …, so no text a session id or a
    model name holds can close the element or open a comment."""
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(resources.files(__package__) / "templates")), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(
        n=lambda v: "—" if v is None else f"{v:,}",
        pct=lambda v: "—" if v is None else f"{100 * v:.1f}%",
        sec=lambda v: "—" if v is None else f"{v:.3f}",
        usd=lambda v: "—" if v is None else f"${v:,.4f}",
        island=_json_island,
    )
    return env


def _findings(lint: dict[str, Any], diffs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """Findings tagged with the row index (in ``requests``) of their request and, on the first
    finding of each row that has one, that row's diff excerpt (``_diff``); per marked row the
    codes of its findings (the chart markers' hover text)."""
    where = {(r["session"], r["index"]): i for i, r in enumerate(lint["requests"])}
    excerpt = {d["row"]: d for d in diffs}
    out, marked = [], {}
    for f in lint["findings"]:
        row = where.get((f["session"], f["request"]))
        out.append({**f, "_row": row, "_diff": excerpt.get(row) if row not in marked else None})
        if row is not None:
            marked[row] = (marked[row] + ", " if row in marked else "") + f["code"]
    return out, marked


def _session_figures(lint: dict[str, Any], marked: dict[int, str]) -> list[dict[str, Any]]:
    rows = [{**r, "_row": i} for i, r in enumerate(lint["requests"]) if not r["usage_only"]]
    by_session: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_session.setdefault(r["session"], []).append(r)
    largest = sorted(by_session, key=lambda s: -len(by_session[s]))[:MAX_SESSION_CHARTS]
    return [{"session": s, "figure": charts.session_turns(s, by_session[s], marked,
                                                           any(r["exact"] is False for r in by_session[s]))}
            for s in by_session if s in largest]


def _fleet(fleet: dict[str, Any] | None) -> dict[str, Any] | None:
    """The fleet section's figures (the ``simulate --replicas N --json`` document, read per
    docs/schemas/simulate-fleet.schema.json by :func:`.sources.read_simulate`); None without one."""
    if not fleet or not fleet["results"]:
        return None
    return {"doc": fleet, "bars": charts.fleet_bars(fleet), "ttft": charts.fleet_ttft(fleet)}


def _replay(rows: list[dict[str, Any]] | None, serving: dict[str, Any] | None = None) -> dict[str, Any] | None:
    if not rows:
        return None
    passes = list(dict.fromkeys(r["pass_name"] for r in rows))
    table = [{"pass_name": p, "rows": [r for r in rows if r["pass_name"] == p]} for p in passes]
    return {"passes": table, "cdf": charts.ttft_cdf(rows), "scatter": charts.cached_scatter(rows),
            "runs": sorted({str(r.get("run")) for r in rows if r.get("run")}), "serving": serving,
            "percentiles": charts.serving_percentiles(serving) if serving else None,
            "per_second": charts.serving_per_second(serving) if serving else None,
            "latencies": charts.SERVING_LATENCIES, "quantiles": charts.PERCENTILES}


def context(docs: ReportDocuments, title: str) -> dict[str, Any]:
    """The template's values: the documents, the figures' JSON and the notes to list."""
    lint, sim = docs.lint, docs.simulate
    if sim is not None:
        sim = {**SIMULATE_DEFAULTS, **sim, "results": [{**ROW_DEFAULTS, **r} for r in sim["results"]]}
    findings, marked = _findings(lint, docs.diffs)
    content = [r for r in lint["requests"] if not r["usage_only"]]
    notes = list(dict.fromkeys([*lint.get("warnings", []), *lint["tokenizers"].values(),
                                *(sim["tokenizers"] if sim else {}).values()]))
    return {
        "title": title, "version": __version__, "docs": docs, "lint": lint, "sim": sim,
        "first": sim["results"][0] if sim and sim["results"] else None,
        # block-hash trace rows (exact None) make no tokenizer claim either way
        "exact": sum(r["exact"] is True for r in content), "approx": sum(r["exact"] is False for r in content),
        "notes": notes, "findings": findings,
        "waterfall": charts.waterfall(lint["summary"]) if lint["summary"]["prompt_tokens"] else None,
        "sessions": _session_figures(lint, marked), "charted_all": len(lint["sessions"]) <= MAX_SESSION_CHARTS,
        "capacity": [f for f in (charts.capacity_curves(sim, u) for u in ("tokens", "bytes")) if f] if sim else [],
        "replay": _replay(docs.replay, docs.serving), "fleet": _fleet(docs.fleet), "plotly": plotly_js_packed(),
        "reuse_time": reuse_time.section(sim),
        "bounded": lint.get("report_bounded"), "replay_bounded": docs.replay_bounded,
    }


def render_html(docs: ReportDocuments, title: str = "prefixcache report") -> str:
    """The whole page (UTF-8 text)."""
    return _environment().get_template("report.html.jinja").render(context(docs, title))
