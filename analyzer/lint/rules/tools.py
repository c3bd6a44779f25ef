"""PC2xx: tool definitions that move, change or re-serialize between requests.

Tool schemas are rendered near the top of the prompt (OpenAI and most chat
templates: with the system prompt; Anthropic: before it), so any change there
invalidates the system prompt and the whole history behind it. The rules compare
the decoded tool lists structurally: names and order, the set of tools, and the key
order of each logged schema (``ToolDef.schema`` keeps it).
"""

from __future__ import annotations

from typing import Any, Mapping

from prefixcache.analyzer.model import ToolDef
from prefixcache.analyzer.lint.rules.base import Finding, PairContext, Rule

TOOL_PARTS = frozenset({"tool", "system", "template"})


def _names(tools: tuple[ToolDef, ...]) -> list[str]:
    return [t.name for t in tools]


def key_order_diff(a: Any, b: Any, path: str = "") -> str | None:
    """Path of the first object whose keys are equal as sets but in another order
    (``a`` and ``b`` decoded JSON, equal as values); None when none."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if list(a) != list(b) and set(a) == set(b):
            return path
        for k in a:
            if k in b:
                found = key_order_diff(a[k], b[k], f"{path}.{k}")
                if found is not None:
                    return found
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = key_order_diff(x, y, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def tools_rendered(ctx: PairContext) -> bool:
    """True when either prompt of the pair renders a tool definition (a ``tool`` segment).
    A template that drops the tools (PC503) renders none: their order, set or key order
    changes no token, so no PC2xx rule can be the cause of the divergence."""
    return any(seg.kind == "tool" for p in (ctx.r, ctx.s) if p.rendered is not None for seg in p.rendered.segments)


def _tool_path(tool: ToolDef, i: int) -> str:
    return tool.path or f"tools[{i}]"


class ToolOrder(Rule):
    """The same tools were sent in a different order.

    What it does:
        Compares the tool lists of a request and the previous request of its
        session: same set of names, different order.
    Why it breaks caching:
        Tool schemas are rendered into the prompt in list order near its start; a
        permutation changes the text from the first moved tool on, so the rest of
        the tools, the system prompt that follows them and the whole history miss.
        Typical source: tools kept in a hash map (Go maps, Rust HashMap, MCP
        servers reconnecting in another order).
    Example:
        turn 3: tools [read_file, apply_patch, run_shell, search_code]
        turn 4: tools [search_code, read_file, apply_patch, run_shell]
    Use instead:
        Sort tools deterministically (by name) before every request, or keep the
        registration order in an ordered container.
    Fix safety:
        Safe: tool order carries no meaning for the model's ability to call them.
    """

    code, name, group, severity = "PC201", "tool-order", "tools", "error"
    severity_when = 'no finding when the template renders no tool (PC503: the order changes no token)'
    parts = TOOL_PARTS
    order = 20
    fix = "Sort the tool list deterministically (e.g. by name) before building every request."

    def check(self, ctx: PairContext) -> Finding | None:
        if not tools_rendered(ctx):
            return None
        new, old = _names(ctx.rq.tools), _names(ctx.sq.tools)
        if new == old or sorted(new) != sorted(old):
            return None
        i = next(k for k, (a, b) in enumerate(zip(new, old)) if a != b)
        msg = f"tool order changed from tools[{i}]: {old[i]!r} is now {new[i]!r} (same {len(new)} tools)"
        return ctx.finding(self, msg, segment="tools", json_path="tools")


class ToolSetChanged(Rule):
    """Tools were added, removed or redefined in the middle of a session.

    What it does:
        Compares the tool lists of a request and the previous request of its
        session: a name appears or disappears, or a tool of the same name and place
        has a different definition (description or parameters), not merely a
        different key order (that is PC203).
    Why it breaks caching:
        The tools block sits in the prefix; adding, dropping or editing one tool
        changes the text from that tool on and invalidates everything after it,
        including the whole conversation history.
    Example:
        turn 5 adds "web_fetch" after an MCP server connects, or removes tools the
        agent decided it no longer needs.
    Use instead:
        Send the full, fixed tool set from the first request; restrict which tools
        may be used with tool_choice or by masking, not by removing definitions.
    Fix safety:
        Needs review: the model will see tools it should not call yet; enforce
        availability in the tool executor.
    """

    code, name, group, severity = "PC202", "tool-set-changed", "tools", "warning"
    severity_when = 'no finding when the template renders no tool'
    parts = TOOL_PARTS
    order = 21
    fix = "Send one fixed tool set for the whole session; gate tool use with tool_choice or in the executor."

    def check(self, ctx: PairContext) -> Finding | None:
        if not tools_rendered(ctx):
            return None
        new, old = ctx.rq.tools, ctx.sq.tools
        nn, on = _names(new), _names(old)
        if set(nn) != set(on):
            added = [n for n in nn if n not in on]
            removed = [n for n in on if n not in nn]
            parts = ([f"added {', '.join(added)}"] if added else []) + ([f"removed {', '.join(removed)}"] if removed else [])
            return ctx.finding(self, f"tool set changed mid-session: {'; '.join(parts)}", segment="tools", json_path="tools")
        if nn != on:
            return None
        for i, (a, b) in enumerate(zip(new, old)):
            if dict(a.schema) != dict(b.schema) or a.description != b.description:
                return ctx.finding(self, f"definition of tool {a.name!r} changed (description or parameters)",
                                   segment=f"tools[{i}]", json_path=_tool_path(a, i))
        return None


class SchemaKeyOrder(Rule):
    """A tool schema was re-serialized with its keys in another order.

    What it does:
        For tools present in both requests at the same place, compares the logged
        schema objects: equal as decoded JSON, but some object (usually
        ``parameters.properties``) lists its keys in a different order.
    Why it breaks caching:
        The schema is rendered as JSON text, so a key permutation changes the
        prompt text inside the tools block and every token after it misses, even
        though the tool is semantically identical.
    Example:
        turn 4: "properties": {"command": ..., "timeout": ...}
        turn 5: "properties": {"timeout": ..., "command": ...}
    Use instead:
        Build schemas once and reuse the same object, or serialize with sorted keys
        (json.dumps(sort_keys=True)) / an insertion-ordered map everywhere.
    Fix safety:
        Safe: JSON object key order has no meaning.
    """

    code, name, group, severity = "PC203", "schema-key-order", "tools", "error"
    severity_when = 'no finding when the template renders no tool'
    parts = TOOL_PARTS
    order = 22
    fix = "Build each tool schema once (or serialize with sorted keys) so its key order never changes."

    def check(self, ctx: PairContext) -> Finding | None:
        if not tools_rendered(ctx):
            return None
        new, old = ctx.rq.tools, ctx.sq.tools
        if _names(new) != _names(old):
            return None
        for i, (a, b) in enumerate(zip(new, old)):
            if dict(a.schema) != dict(b.schema):
                continue
            where = key_order_diff(a.schema, b.schema)
            if where is not None:
                path = _tool_path(a, i) + where
                return ctx.finding(self, f"keys of {where.lstrip('.') or 'the schema'} in tool {a.name!r} were re-ordered",
                                   segment=f"tools[{i}]", json_path=path)
        return None


RULES = [ToolOrder(), ToolSetChanged(), SchemaKeyOrder()]
