"""``prefixcache report``: one self-contained, offline HTML file from the library's reports.

The last feature layer of analyzer (below :mod:`prefixcache.analyzer.api`, whose ``report``
calls it): :func:`gather` runs lint and simulate (or reads a saved ``simulate --json`` document and a replay run's JSONL rows)
and keeps each document as its command's ``--json`` prints it; :func:`render_html` lays them
out with Jinja2 templates (``templates/``, package data) and plotly figures, plotly.js
inlined. No number is computed here that the documents do not hold.

>>> docs = gather(["examples/agent_session.jsonl"], ReportOptions())
>>> Path("report.html").write_text(render_html(docs))
"""

from prefixcache.analyzer.html.page import render_html
from prefixcache.analyzer.html.content import ReportDocuments, ReportOptions, gather

__all__ = ["ReportDocuments", "ReportOptions", "gather", "render_html"]
