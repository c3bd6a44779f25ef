"""``lint``: where each prompt's reusable prefix breaks, why (rules with permanent codes), and what it costs.

Modules: :mod:`.engine` (the streaming :class:`~.engine.Linter` and its waterfall),
:mod:`.locate` (the first differing token mapped back to the request),
:mod:`.rules` (one module per rule group), :mod:`.config` (``[tool.prefixcache]``).
"""
