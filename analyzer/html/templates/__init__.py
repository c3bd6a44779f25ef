"""The HTML report's Jinja templates (package data)."""
