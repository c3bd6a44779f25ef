"""Render requests to prompt text: chat templates (Jinja sandbox) and provider layouts.

Public API::

    Renderer.render(request) -> RenderedPrompt      (char segments, warnings)
    load_template(name) -> str                      (a shipped template or a .jinja file)

Which renderer and tokenizer a logged model gets (``auto``) is decided one stage
later, in :mod:`prefixcache.analyzer.prepare.resolve`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Protocol

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.render.files import read_text
from prefixcache.analyzer.model import RenderedPrompt, Request
from prefixcache.analyzer.render.provider import ProviderLayout
from prefixcache.analyzer.render.renderer import JinjaRenderer

__all__ = ["Renderer", "JinjaRenderer", "ProviderLayout", "fold_warnings", "load_template"]


class Renderer(Protocol):
    """Anything that renders a request: ``name``, ``exact`` and ``render``."""

    name: str
    exact: bool

    def render(self, request: Request) -> RenderedPrompt: ...


def shipped_templates() -> frozenset[str]:
    """The names of the chat templates this package ships (``templates/*.jinja``, without the suffix):
    the only templates trusted to render in-process (see :class:`~.jinja_template.JinjaChat`)."""
    from importlib.resources import files

    return frozenset(p.name[: -len(".jinja")] for p in files("prefixcache.templates").iterdir()
                     if p.name.endswith(".jinja"))


def load_template(name: str) -> str:
    """The source of a shipped template (``chatml_tools``) or of a ``.jinja`` file path.

    Raises ConfigError for an unknown name, a missing file, or a file that is not
    UTF-8 text (see :func:`prefixcache.analyzer.render.files.read_text`)."""
    p = Path(name)
    if p.suffix == ".jinja":
        if not p.is_file():
            raise ConfigError(f"chat template file not found: {name}")
        return read_text(p, "chat template")
    from importlib.resources import files

    res = files("prefixcache.templates").joinpath(f"{name}.jinja")
    if not res.is_file():
        raise ConfigError(f"unknown chat template {name!r}: not a shipped template, provider layout or .jinja file")
    return res.read_text(encoding="utf-8")


def fold_warnings(warnings: Iterable[str]) -> tuple[str, ...]:
    """Renderer warnings (what a template dropped) folded to one per kind: warnings that
    differ only in numbers (``messages[3]`` vs ``messages[7]``) are one kind, shown by its
    last instance, in the order each kind first appeared."""
    kinds: dict[str, str] = {}
    for w in warnings:
        kinds[re.sub(r"\d+", "N", w)] = w
    return tuple(kinds.values())
