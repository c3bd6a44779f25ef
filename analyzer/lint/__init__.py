"""``lint``: where each prompt's reusable prefix breaks, why (rules with permanent codes), and what it costs.

Modules: :mod:`.engine` (the streaming :class:`~.engine.Linter` and its waterfall),
:mod:`.locate` (the first differing token mapped back to the request),
:mod:`.rules` (one module per rule group, the history classifier, the rule docs),
:mod:`.config` (``[tool.prefixcache]``), :mod:`.run` (one run: the entry point
:func:`~.report.lint_paths`, SARIF / GitHub / text and the CI verdict) and
:mod:`.document` (the typed JSON document).
"""
