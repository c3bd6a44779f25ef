"""PC5xx: the chat template or the tokenizer, not the client, changed the tokens.

These causes are invisible in the request JSON: the client sent the same messages,
but the rendered text (PC501) or the token ids (PC502) differ, or the template
silently dropped content the request carries (PC503).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import re

import orjson

from prefixcache.analyzer.identity import template_identity
from prefixcache.analyzer.lint.rules.base import Finding, PairContext, Rule, origin

if TYPE_CHECKING:
    from prefixcache.analyzer.prepare import Prepared

_INDEXES = re.compile(r"\[\d+\](?:, \w+\[\d+\])*|\d+")
#: The renderers' warning for reasoning whose text the log does not hold.
_OPAQUE_REASONING = re.compile(r"\b(encrypted|redacted)\b.*\breasoning\b|\breasoning\b.*\b(encrypted|redacted)\b")
ALL_PARTS = frozenset({"system", "tool", "message", "generation_prompt", "template", "opaque", "end"})


def _same_part(ctx: PairContext) -> bool:
    """The request part at the divergence is equal in both requests (as sent)."""
    div = ctx.div
    if div.kind == "tool":
        a, b = ctx.rq.tools, ctx.sq.tools
        if not (0 <= div.ref < len(a) and div.ref < len(b)):
            return False
        return orjson.dumps(a[div.ref].schema) == orjson.dumps(b[div.ref].schema)
    new, old = ctx.r_msg(), ctx.s_msg()
    return new is not None and old is not None and template_identity(new) == template_identity(old)


def _same_history_upto(ctx: PairContext, ref: int) -> bool:
    """Messages 0..ref are equal in both requests (as sent)."""
    a, b = ctx.rq.messages, ctx.sq.messages
    if ref < 0 or ref >= len(a) or ref >= len(b):
        return False
    return all(template_identity(x) == template_identity(y) for x, y in zip(a[: ref + 1], b[: ref + 1]))


def _tools_changed(ctx: PairContext) -> bool:
    """True when the two requests send different tool definitions (names, order or schemas)."""
    a, b = ctx.rq.tools, ctx.sq.tools
    return len(a) != len(b) or any(x.name != y.name or x.schema != y.schema for x, y in zip(a, b))


class TemplateRerenderDrift(Rule):
    """The chat template renders an unchanged earlier turn differently than before.

    What it does:
        When the part holding the first difference is identical in both requests
        as sent (same message, same tool), yet the rendered text differs, the
        template is to blame: it renders earlier turns depending on what follows
        them (e.g. Qwen3 strips ``<think>`` from turns before the last user
        message), or renders a finished assistant turn differently from the
        generation prompt it was produced after.
    Why it breaks caching:
        The engine cached the tokens as they were generated; on the next turn the
        template produces other tokens for the same turn, so the cache misses from
        there although the client changed nothing.
    Example:
        turn 3 renders assistant messages[2] as "<think>\\n...\\n</think>\\n\\nDone";
        turn 4 renders it as "Done" because a new user message follows it.
    Use instead:
        Use a template that renders history turns exactly as generated (e.g. keep
        reasoning in history), or pre-render the history yourself and send it as is.
    Fix safety:
        Needs review: keeping reasoning in history changes what the model sees.
    """

    code, name, group, severity = "PC501", "template-rerender-drift", "template", "warning"
    severity_when = "info when an assistant turn renders differently from the generation prompt it was produced after; no finding when only the markup that ended the earlier prompt after its last turn is replaced (e.g. DeepSeek's `<think>` → `</think>`, 1 token)"
    parts = frozenset({"system", "tool", "message", "generation_prompt"})
    order = 60
    fix = "Use a chat template that renders earlier turns exactly as they were generated."

    def check(self, ctx: PairContext) -> Finding | None:
        div = ctx.div
        if div.other_kind == "generation_prompt" and div.kind == "message":
            m = ctx.r_msg()
            if m is not None and m.role == "assistant":
                return ctx.finding(self, f"the template renders assistant turn {div.segment} differently from the "
                                   "generation prompt it was produced after", severity="info")
            return None
        if _tools_changed(ctx):  # a tool was added, removed or redefined: PC2xx explains the new text
            return None
        if div.kind in ("system", "message", "tool") and _same_part(ctx):
            return ctx.finding(self, f"{div.segment} is unchanged in the request but renders to different text")
        # The earlier request's segmentation names the part reliably when this one's
        # rendering re-flowed earlier turns: check the part it names.
        if div.other_kind in ("system", "message") and _same_history_upto(ctx, div.other_ref):
            m = ctx.sq.messages[div.other_ref]
            seg = "system" if div.other_kind == "system" else f"messages[{div.other_ref}]"
            return ctx.finding(self, f"{seg} is unchanged in the request but renders to different text",
                               segment=seg, json_path=m.path or f"messages[{div.other_ref}]", line=None)
        return None


class TokenizerSeam(Rule):
    """Same text, different tokens: the tokenizer merged across the old prompt's end.

    What it does:
        Reports a divergence where the earlier prompt's text is a prefix of this
        prompt's text, yet its token ids are not a prefix of this prompt's ids:
        the last tokens of the old prompt merged with the new text (BPE merges
        across the seam).
    Why it breaks caching:
        Prefix caches match token ids, not text; a re-tokenized seam costs the
        tokens from the seam on (usually a few, unless the prompt ends mid-word
        or mid-whitespace run).
    Example:
        prompt 1 ends "...result:\\n"; prompt 2 continues "\\n\\nNext"; the
        tokenizer emits one "\\n\\n\\n" token where prompt 1 had "\\n".
    Use instead:
        End every prompt on a token boundary that cannot merge (a special token,
        as chat templates do), or tokenize incrementally and send token ids.
    Fix safety:
        Safe: the text is unchanged.
    """

    code, name, group, severity = "PC502", "tokenizer-seam", "template", "info"
    parts = ALL_PARTS
    order = 1
    fix = "End prompts on a non-mergeable boundary (special token), or send token ids built incrementally."

    def check(self, ctx: PairContext) -> Finding | None:
        if ctx.r.rendered is None or ctx.s.rendered is None or ctx.r.tokens is None or ctx.s.tokens is None:
            return None
        s_text, r_text = ctx.s_text, ctx.r_text
        if len(r_text) < len(s_text) or not r_text.startswith(s_text):
            return None
        hidden = max(ctx.s.tokens.opaque_prefix_tokens, ctx.r.tokens.opaque_prefix_tokens)
        if ctx.div.token >= len(ctx.s.tokens.ids) or ctx.div.token < hidden:
            return None  # no divergence in the text, or one inside the hidden prefix
        return ctx.finding(self, f"the earlier prompt's text is a prefix of this one, but its last "
                           f"{len(ctx.s.tokens.ids) - ctx.div.token} token(s) were re-tokenized at the seam")


class TemplateDropsContent(Rule):
    """The chat template silently ignores content the request carries.

    What it does:
        Reports, once per session, each warning the renderer raised for content
        it dropped: tools, reasoning, message fields the template never reads.
        Encrypted or redacted reasoning (OpenAI ``encrypted_content``, Anthropic
        ``redacted_thinking``) is reported at info severity only: no template can
        render it, so there is nothing to fix, but its tokens are missing from
        the counts.
    Why it breaks caching:
        It does not break caching by itself, but the prompt the analysis (and a
        self-hosted engine using this template) sees is not the prompt the client
        meant: cache figures for the dropped parts are wrong, and the model never
        sees those tools or fields.
    Example:
        SmolLM2's template ignores ``tools=[...]``: a request with 8 tools renders
        without any of them.
    Use instead:
        Pick a template that renders every part the request uses (``--template``),
        e.g. a ChatML template with a tools block.
    Fix safety:
        Needs review: a different template changes the prompt the model sees.
    """

    code, name, group, severity = "PC503", "template-drops-content", "template", "warning"
    severity_when = 'info when a hosted provider renders the prompt (nothing to change in the requests) and for encrypted/redacted reasoning (no template can render it)'
    scope = "request"
    fix = "Choose a chat template that renders tools, reasoning and every field the requests use (--template)."

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        rendered, req = prepared.rendered, prepared.request
        if rendered is None:
            return
        seen = state.setdefault(self.code, set())
        opaque = any(m.reasoning_opaque for m in req.messages)
        for warning in rendered.warnings:
            key = (req.session, _INDEXES.sub("#", warning))  # once per kind of warning, whatever the counts
            if key in seen:
                continue
            seen.add(key)
            if opaque and _OPAQUE_REASONING.search(warning):
                yield self._opaque_reasoning(prepared, warning)
                continue
            yield Finding(self.code, self.name, self.severity, req.session, req.index, "template",
                          "", None, None, f"{rendered.renderer}: {warning}", self.fix,
                          **origin(req), certain=True)

    def _opaque_reasoning(self, prepared: "Prepared", warning: str) -> Finding:
        """Encrypted / redacted reasoning: no template can render it, so this is a
        note on the figures (info), not something to fix."""
        req = prepared.request
        turns = [i for i, m in enumerate(req.messages) if m.reasoning_opaque]
        first = req.messages[turns[0]]
        return Finding(
            self.code, self.name, "info", req.session, req.index, f"messages[{turns[0]}]",
            f"{first.path or f'messages[{turns[0]}]'}", None, None,
            f"{len(turns)} assistant turn(s) carry encrypted/redacted reasoning, which no chat template can "
            f"render: its tokens are unknown and left out, so prompt sizes from messages[{turns[0]}] on are "
            f"undercounted ({prepared.rendered.renderer}: {warning})",
            "Nothing to fix in the template: the provider keeps the reasoning opaque; read the figures as "
            "lower bounds.", **origin(req), certain=True,
        )


RULES = [TemplateRerenderDrift(), TokenizerSeam(), TemplateDropsContent()]
