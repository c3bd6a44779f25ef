"""``check``: the CI gate for Jinja2 prompt templates.

Modules: :mod:`.checker` (render each context with variations and measure the
stable token prefix), :mod:`.render` (sandboxed rendering with source tracing),
:mod:`.static` (template AST checks), :mod:`.vary` (the clock / id / order /
whitespace variations), :mod:`.run` (the entry point
:func:`~.report.check_templates` and the typed JSON record per template).
"""
