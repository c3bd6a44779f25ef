"""``canonicalize``: logged requests rewritten into a cache-stable form, and written back.

Modules: :mod:`.rewrite` (the rewrites by rule code and the reported history
changes), :mod:`.writers` (requests back to their own log format or OpenAI Chat).
"""
