"""The report's "Reuse in time" section: reuse gaps, survival curves and the TTL what-if, as the simulate document holds them.

Reads the ``analyses`` of a ``simulate --json --survival [--ttl-whatif] [--reuse prefix,chunks]``
document (:mod:`prefixcache.analyzer.cache.simulate.analyses`) and returns the section's figures
(plotly JSON) and rows; None when the document has no analyses (a saved document made without
those flags). Like :mod:`.charts`, no number is computed here: every point is one of the
document's ``t_points_s`` fractions.
"""

from __future__ import annotations

from typing import Any

from prefixcache.analyzer.html.charts import _figure


def _t(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def gap_curves(surv: dict[str, Any]) -> str:
    """Share of reuses whose gap is ≤ t, against t (log), one line per segment kind (``all`` first)."""
    import plotly.graph_objects as go

    data = [go.Scatter(x=[p["t_s"] for p in g["within"]], y=[p["fraction"] for p in g["within"]], name=g["kind"],
                       mode="lines+markers", customdata=[_t(p["t_s"]) for p in g["within"]],
                       hovertemplate=g["kind"] + ": %{y:.1%} of reuses within %{customdata}")
            for g in surv["gaps"]]
    return _figure(data, f"reuse gaps ({surv['block_size']}-token blocks): share of reuses within t",
                   {"title": "t: time since the block's previous use (s, log scale)", "type": "log"},
                   {"title": "share of reuses", "tickformat": ".0%", "range": [0, 1.05]})


def survival_curves(surv: dict[str, Any]) -> str | None:
    """S(t), the share of stored blocks still cached t after being stored, one line per capacity
    (segment kind ``all``); None without residency rows."""
    import plotly.graph_objects as go

    rows = [r for r in surv["residency"] if r["kind"] == "all"]
    if not rows:
        return None
    data = []
    for r in rows:
        pts = [p for p in r["survival"] if p["fraction"] is not None]
        name = r["capacity"] + (f" · ttl {r['ttl_s']:g} s" if r["ttl_s"] is not None else "")
        data.append(go.Scatter(x=[p["t_s"] for p in pts], y=[p["fraction"] for p in pts], name=name,
                               mode="lines+markers", customdata=[_t(p["t_s"]) for p in pts],
                               hovertemplate=name + ": %{y:.1%} still cached after %{customdata}"))
    return _figure(data, "survival: share of stored blocks still cached t after storing",
                   {"title": "t (s, log scale)", "type": "log"},
                   {"title": "share still cached", "tickformat": ".0%", "range": [0, 1.05]})


def section(sim: dict[str, Any] | None) -> dict[str, Any] | None:
    """The section's values: ``survival`` (the document's), its two figures, ``ttl`` (the TTL
    what-if) and ``chunks`` (the chunk ceiling); None when the document has none of the three
    (its analyses may hold only the provider split or the sizing)."""
    a = (sim or {}).get("analyses")
    if not a or not any(a.get(k) for k in ("survival", "ttl_whatif", "chunks")):
        return None
    surv = a.get("survival")
    return {"survival": surv, "gaps": gap_curves(surv) if surv and surv["gaps"][0]["gaps_s"]["count"] else None,
            "curves": survival_curves(surv) if surv else None, "ttl": a.get("ttl_whatif"), "chunks": a.get("chunks")}
