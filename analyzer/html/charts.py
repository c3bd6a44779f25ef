"""The report's charts as plotly figures, drawn from the JSON documents as written.

Each builder takes parsed JSON values (a ``lint --json`` / ``simulate --json`` document,
replay result rows) and returns the figure's JSON text (``fig.to_json()``), which the page
hands to plotly.js as is. The figures carry the documents' own numbers; the waterfall's total
is plotly's own, and the TTFT CDF is the sorted values against k/n. Units: token
counts are tokens, capacities tokens or bytes, TTFT seconds. plotly is imported on first
use, so importing this module (and the CLI) stays cheap.
"""

from __future__ import annotations

from typing import Any, Sequence

#: Colours of the fixed series (plotly's default qualitative palette for the rest).
REUSED, NEW = "#2ca02c", "#9ecae1"
LOST = ("#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _figure(data: list, title: str, xaxis: dict, yaxis: dict, **layout: Any) -> str:
    import plotly.graph_objects as go

    fig = go.Figure(data=data)
    fig.update_layout(title=title, xaxis=xaxis, yaxis=yaxis, template="plotly_white", height=420,
                      margin={"l": 70, "r": 20, "t": 60, "b": 60}, legend={"orientation": "h", "y": -0.2}, **layout)
    return fig.to_json()


def waterfall(summary: dict[str, Any]) -> str:
    """Prompt tokens → minus new tokens → minus lost tokens per rule code → reusable
    (``lint --json`` ``summary``; plotly draws the total, which equals ``reusable_tokens``)."""
    import plotly.graph_objects as go

    codes = list(summary["lost_tokens_by_code"])
    x = ["prompt", "new", *(f"lost {c}" for c in codes), "reusable"]
    y = [summary["prompt_tokens"], -summary["new_tokens"], *(-summary["lost_tokens_by_code"][c] for c in codes), 0]
    shown = [summary["prompt_tokens"], *y[1:-1], summary["reusable_tokens"]]
    bar = go.Waterfall(x=x, y=y, measure=["absolute", *["relative"] * (len(x) - 2), "total"],
                       text=[f"{v:,}" for v in shown],
                       textposition=["outside", *["inside"] * (len(x) - 2), "outside"], connector={"line": {"color": "#999"}},
                       increasing={"marker": {"color": NEW}}, decreasing={"marker": {"color": LOST[0]}},
                       totals={"marker": {"color": REUSED}}, name="tokens")
    return _figure([bar], "prompt tokens: new, lost by cause, reusable", {"title": ""},
                   {"title": "tokens", "tickformat": ","}, showlegend=False)


def session_turns(session: str, rows: Sequence[dict[str, Any]], marked: dict[int, str], approx: bool) -> str:
    """One session's requests (``lint --json`` ``requests`` rows of that session, in order):
    prompt tokens stacked as reused / new / lost by rule code, with a marker above every
    request in ``marked`` (row index in the document → the codes of its findings); a
    marker's ``customdata`` is that row index (the page shows its findings on click)."""
    import plotly.graph_objects as go

    x = [r["index"] for r in rows]
    data = [go.Bar(x=x, y=[r["reusable_tokens"] or 0 for r in rows], name="reused", marker_color=REUSED),
            go.Bar(x=x, y=[r["new_tokens"] or 0 for r in rows], name="new", marker_color=NEW)]
    expired = [r.get("ttl_tokens") or 0 for r in rows]  # part of lost_tokens: the ttl cause, not lost_code's
    codes = sorted({r["lost_code"] for r, t in zip(rows, expired) if r["lost_code"] and (r["lost_tokens"] or 0) > t})
    for i, code in enumerate(codes):
        data.append(go.Bar(x=x, y=[r["lost_tokens"] - t if r["lost_code"] == code else 0 for r, t in zip(rows, expired)],
                           name=f"lost {code}", marker_color=LOST[i % len(LOST)]))
    if any(expired):
        data.append(go.Bar(x=x, y=expired, name="lost ttl", marker_color=LOST[len(codes) % len(LOST)]))
    hits = [(n, r) for n, r in enumerate(rows) if r["_row"] in marked]
    if hits:
        data.append(go.Scatter(
            x=[r["index"] for _, r in hits], y=[r["prompt_tokens"] or 0 for _, r in hits], mode="markers",
            name="break (click for the finding)", customdata=[r["_row"] for _, r in hits],
            hovertext=[marked[r["_row"]] for _, r in hits], hoverinfo="text+x",
            marker={"symbol": "triangle-down", "size": 14, "color": "#000"}, cliponaxis=False))
    title = f"session {session}: prompt tokens per request" + (" (approximate tokenizer)" if approx else "")
    return _figure(data, title, {"title": "request in session (turn)", "dtick": 1 if len(x) <= 30 else None},
                   {"title": "prompt tokens", "tickformat": ","}, barmode="stack")


def _policy(row: dict[str, Any]) -> str:
    name = row["policy"] + (f" ttl {row['ttl_s']:g}s" if row.get("ttl_s") is not None else "")
    return f"{name} (offline bound)" if row["policy"] == "belady" else name


def capacity_curves(sim: dict[str, Any], unit: str) -> str | None:
    """Hit ratio (tokens) against capacity (``unit``: ``tokens`` or ``bytes``) per policy,
    with the ideal (an unbounded cache) as a dashed line; None when no result row has a
    capacity in that unit (unbounded runs, no KV shape for bytes)."""
    import plotly.graph_objects as go

    key = f"capacity_{unit}"
    rows = [r for r in sim.get("results", []) if r.get(key) is not None]
    if not rows:
        return None
    data = []
    for policy in dict.fromkeys(_policy(r) for r in rows):
        mine = sorted((r for r in rows if _policy(r) == policy), key=lambda r: r[key])
        data.append(go.Scatter(x=[r[key] for r in mine], y=[r["hit_ratio_tokens"] for r in mine], name=policy,
                               mode="lines+markers", customdata=[r["capacity"] for r in mine],
                               hovertemplate="capacity %{customdata} = %{x:,} " + unit + "<br>hit %{y:.1%}"))
    xs = sorted({r[key] for r in rows})
    ideal = rows[0]["ideal_hit_ratio"]
    data.append(go.Scatter(x=[xs[0], xs[-1]], y=[ideal, ideal], mode="lines", name="ideal (unbounded cache)",
                           line={"dash": "dash", "color": "#444"}, hovertemplate="ideal %{y:.1%}"))
    return _figure(data, f"hit ratio (tokens) vs capacity ({unit}), cache {sim['cache']}",
                   {"title": f"capacity ({unit}, log scale)", "type": "log"},
                   {"title": "hit ratio (share of prompt tokens served from cache)", "tickformat": ".0%",
                    "range": [0, 1.05]})


def _passes(rows: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["pass_name"] for r in rows))


def ttft_cdf(rows: Sequence[dict[str, Any]]) -> str:
    """The TTFT distribution per pass as a step curve (empirical CDF): each pass's logged
    ``ttft_s`` (seconds) in ascending order against the share of its requests at or below
    it (k/n, 6 places)."""
    import plotly.graph_objects as go

    data = []
    for p in _passes(rows):
        xs = sorted(r["ttft_s"] for r in rows if r["pass_name"] == p and r["ttft_s"] is not None)
        data.append(go.Scatter(x=xs, y=[round((k + 1) / len(xs), 6) for k in range(len(xs))], name=p,
                               mode="lines+markers", line_shape="hv", hovertemplate="%{y:.0%} of requests ≤ %{x:.3f} s"))
    return _figure(data, "TTFT per pass (empirical CDF)", {"title": "time to first token (s)"},
                   {"title": "share of the pass's requests", "tickformat": ".0%", "range": [0, 1.05]})


def cached_scatter(rows: Sequence[dict[str, Any]]) -> str | None:
    """Observed cached tokens (the engine's) against the simulator's prediction per request
    of every pass that has one, with the y = x diagonal; None when no row has a prediction."""
    import plotly.graph_objects as go

    have = [r for r in rows if r.get("predicted_cached") is not None]
    if not have:
        return None
    data = [go.Scatter(x=[r["predicted_cached"] for r in have if r["pass_name"] == p],
                       y=[r["cached_tokens"] for r in have if r["pass_name"] == p], mode="markers", name=p,
                       customdata=[f"{r['session']} request {r['request_index']}" for r in have if r["pass_name"] == p],
                       hovertemplate="%{customdata}<br>predicted %{x:,}<br>observed %{y:,}")
            for p in _passes(have)]
    top = max(max(r["predicted_cached"], r["cached_tokens"]) for r in have)
    data.append(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="predicted = observed",
                           line={"dash": "dot", "color": "#888"}, hoverinfo="skip"))
    return _figure(data, "cached tokens: simulator's prediction vs the engine's",
                   {"title": "predicted cached tokens", "tickformat": ","},
                   {"title": "observed cached tokens", "tickformat": ","})


#: The serving latencies charted, their ``ServingFigures`` key and label.
SERVING_LATENCIES = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E"))
#: The percentiles charted (``Distribution`` keys).
PERCENTILES = ("p50", "p90", "p95", "p99")


def serving_percentiles(serving: dict[str, Any]) -> str:
    """TTFT, TPOT, ITL and E2E at P50 / P90 / P95 / P99 (milliseconds) per pass (``{pass:
    ServingFigures as JSON}``), grouped bars; a latency without samples (TPOT of one-token
    answers) is left out."""
    import plotly.graph_objects as go

    data = []
    for p, fig in serving.items():
        for q in PERCENTILES:
            xs = [label for key, label in SERVING_LATENCIES if fig[key]["count"]]
            ys = [round(fig[key][q] * 1e3, 3) for key, _ in SERVING_LATENCIES if fig[key]["count"]]
            data.append(go.Bar(x=[f"{x} · {p}" for x in xs], y=ys, name=q, legendgroup=q, showlegend=p == next(iter(serving)),
                               hovertemplate=f"{q} %{{x}}: %{{y:,.3f}} ms"))
    return _figure(data, "latency percentiles per pass (as vllm bench serve defines them)", {"title": ""},
                   {"title": "milliseconds", "tickformat": ","}, barmode="group")


def serving_per_second(serving: dict[str, Any]) -> str:
    """Cached tokens (bars) and hit ratio (lines, right axis) per second of each pass (``{pass:
    ServingFigures as JSON}`` ``per_second`` rows: requests completed in that second)."""
    import plotly.graph_objects as go

    data = []
    for p, fig in serving.items():
        rows = fig["per_second"]
        x = [r["second"] for r in rows]
        data.append(go.Bar(x=x, y=[r["cached_tokens"] for r in rows], name=f"{p} cached tokens", opacity=0.6,
                           hovertemplate="second %{x}: %{y:,} cached tokens"))
        data.append(go.Scatter(x=x, y=[r["hit_ratio"] for r in rows], name=f"{p} hit ratio", yaxis="y2",
                               mode="lines+markers", hovertemplate="second %{x}: hit ratio %{y:.1%}"))
    return _figure(data, "cached tokens and hit ratio per second (by response end)",
                   {"title": "seconds since the first measured send"}, {"title": "cached tokens", "tickformat": ","},
                   yaxis2={"title": "hit ratio (cached ÷ prompt tokens)", "overlaying": "y", "side": "right",
                           "tickformat": ".0%", "range": [0, 1.05]}, barmode="group")


def fleet_bars(fleet: dict[str, Any]) -> str:
    """Per router policy (``simulate --replicas N --json`` ``results`` rows), four bars in
    tokens: the workload ceiling (the document's ``ceiling_tokens``, one unbounded shared
    cache), the capacity loss, the routing loss (negative when the partitioned fleet beats
    the pooled cache) and the tokens achieved (``cached_tokens``): ceiling − capacity loss −
    routing loss = achieved, as the document writes them."""
    import plotly.graph_objects as go

    rows = fleet["results"]
    x = [r["router"] for r in rows]
    series = [("ceiling (unbounded shared cache)", [fleet["ceiling_tokens"]] * len(rows), "#444"),
              ("− capacity loss", [r["capacity_loss_tokens"] for r in rows], LOST[1]),
              ("− routing loss", [r["routing_loss_tokens"] for r in rows], LOST[0]),
              ("= achieved (cached tokens)", [r["cached_tokens"] for r in rows], REUSED)]
    data = [go.Bar(x=x, y=y, name=name, marker_color=colour, text=[f"{v:,}" for v in y], textposition="outside",
                   hovertemplate="%{x}: %{y:,} tokens") for name, y, colour in series]
    return _figure(data, f"fleet of {fleet['replicas']}: ceiling − capacity loss − routing loss = achieved, per router",
                   {"title": "router policy"}, {"title": "tokens", "tickformat": ","}, barmode="group")


def fleet_ttft(fleet: dict[str, Any]) -> str:
    """TTFT P50 / P95 / P99 (seconds) per router policy, the fleet document's figures."""
    import plotly.graph_objects as go

    rows = fleet["results"]
    x = [r["router"] for r in rows]
    data = [go.Bar(x=x, y=[r["ttft"][f"p{q}"] for r in rows], name=f"P{q}", hovertemplate="%{x}: %{y:.3f} s")
            for q in (50, 95, 99)]
    return _figure(data, f"fleet: simulated TTFT percentiles per router ({fleet['hardware']['name']})",
                   {"title": "router policy"}, {"title": "time to first token (s)"}, barmode="group")
