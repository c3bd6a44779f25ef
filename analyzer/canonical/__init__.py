"""``canonicalize``: logged requests rewritten into a cache-stable form, and written back.

Modules: :mod:`.rewrite` (the rewrites by rule code and the reported history
changes), :mod:`.writers` (requests back to their own log format or OpenAI Chat),
:mod:`.report` (the entry point :func:`~.report.canonicalize_paths` and the typed
JSON report), :mod:`.fix` (``lint --fix``: a copy beside each input).
"""
