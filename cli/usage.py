"""Usage errors in one voice: click's exception classes (typer vendors click from 0.24 on) and
:func:`usage_message`, which words typer's pydantic-checked values like click's own checks
(``0 is not in the range x>=1``, ``'abc' is not a valid integer``) instead of pydantic's
("Input should be greater than or equal to 1").
"""

from __future__ import annotations

from typing import Any

try:  # typer >= 0.24 vendors click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
    from typer._click.globals import get_current_context
    from typer._click.utils import make_default_short_help
except ImportError:  # pragma: no cover - older typer runs on click itself
    from click import get_current_context  # type: ignore[no-redef]
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError  # type: ignore[no-redef]
    from click.utils import make_default_short_help  # type: ignore[no-redef]

__all__ = ["ClickException", "NoArgsIsHelpError", "UsageError", "get_current_context", "make_default_short_help",
           "plain_value_error", "usage_message"]

#: pydantic error type -> click's wording (``{input}`` the value as given; ``{x}`` the bound).
_BOUNDS = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"),
           "less_than_equal": ("le", "<="), "less_than": ("lt", "<")}
_KINDS = {"int_parsing": "integer", "int_from_float": "integer", "float_parsing": "number",
          "bool_parsing": "boolean", "finite_number": "finite number"}


def plain_value_error(error: dict[str, Any]) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) in click's words."""
    kind, value = error.get("type", ""), error.get("input")
    if kind in _BOUNDS:
        key, sign = _BOUNDS[kind]
        bound = error.get("ctx", {}).get(key)
        return f"{value} is not in the range x{sign}{f'{bound:g}' if isinstance(bound, float) else bound}"
    if kind in _KINDS:
        return f"{value!r} is not a valid {_KINDS[kind]}"
    msg = str(error.get("msg", "invalid value"))
    return msg[:1].lower() + msg[1:]


def usage_message(exc: UsageError) -> str:
    """The usage error's message on one line, typer's pydantic wording replaced (see module doc)."""
    errors = getattr(exc.__cause__, "errors", None)
    if callable(errors) and hasattr(exc, "message"):
        found = errors()
        if found:
            exc.message = "; ".join(plain_value_error(e) for e in found)
    return " ".join(exc.format_message().split()).rstrip(".")
