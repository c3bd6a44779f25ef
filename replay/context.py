"""Prompts beyond the engine's context are skipped, one by one, before anything is allocated.

A prompt fits when its tokens plus the new tokens to generate are at most the engine's
context (``max_position_embeddings`` of the in-process model; ``max_model_len`` / ``n_ctx``
/ ``context_length`` a server reports). :func:`fitting_prompts` prepares the requests and
returns the prompts that fit and a :class:`~prefixcache.analyzer.model.Skipped` for every
other one, naming its file, record (and line), its prompt tokens and the context.

A prompt far too long is refused before it is even tokenized: a token covers at most
:func:`max_token_chars` characters of text, so a rendered prompt of ``n`` characters has
at least ``n / max_token_chars`` tokens (halved again, for normalizers that drop
characters). Only requests whose logged text alone is past half that bound are rendered
twice (once for the check): a 100 MB line costs its render, never its 25 million token ids.
With ``--max-prompt-tokens`` prompts are truncated instead and nothing is refused early.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Sequence

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.model import Request, Skipped
from prefixcache.analyzer.prepare import Prepared, Preparer
from prefixcache.replay.prompts import Prompt, to_prompts


@functools.lru_cache(maxsize=16)  # per tokenizer object (they hash by identity)
def max_token_chars(tokenizer: Any) -> int | None:
    """Most characters one token of ``tokenizer`` (an analyzer tokenizer) can stand for: the
    longest vocabulary entry (byte-level entries count bytes, never fewer than the
    characters they decode to) or special token; None for a tokenizer of another kind."""
    if hasattr(tokenizer, "tok") and hasattr(tokenizer.tok, "get_vocab"):  # HF tokenizers
        return max((len(s) for s in tokenizer.tok.get_vocab(with_added_tokens=True)), default=None)
    if hasattr(tokenizer, "enc") and hasattr(tokenizer.enc, "token_byte_values"):  # tiktoken
        enc = tokenizer.enc
        return max([len(b) for b in enc.token_byte_values()] + [len(s) for s in enc.special_tokens_set])
    return None


@dataclass(frozen=True, slots=True)
class ContextLimit:
    """The room a prompt has: ``context`` tokens (None = unknown, nothing is refused) minus
    ``max_new_tokens`` (tokens generated after it); ``truncating`` when
    ``--max-prompt-tokens`` cuts prompts to fit instead (no early refusal then)."""

    context: int | None
    max_new_tokens: int = 1
    truncating: bool = False

    @property
    def room(self) -> int | None:
        """Most prompt tokens that fit (None = no limit)."""
        return None if self.context is None else self.context - self.max_new_tokens

    def reason(self, tokens: int, at_least: bool = False, chars: int | None = None) -> str:
        """The skip reason of a prompt of ``tokens`` tokens (a lower bound with ``at_least``)."""
        size = f"at least {tokens:,} tokens ({chars:,} characters, not tokenized)" if at_least else f"{tokens:,} tokens"
        return (f"not replayed: prompt of {size} + {self.max_new_tokens} new exceeds the model's context of "
                f"{self.context:,} tokens (--max-prompt-tokens {max(1, self.room or 1)} would keep its start)")


def _logged_chars(request: Request) -> int:
    """Characters of text the request logs (contents, tool-call arguments, tool descriptions)."""
    n = sum(len(m.content) + sum(len(tc.arguments) for tc in m.tool_calls) for m in request.messages)
    return n + sum(len(t.description) for t in request.tools)


def _too_long_untokenized(request: Request, preparer: Preparer, limit: ContextLimit) -> Skipped | None:
    """A skip for a request whose rendered text alone proves it cannot fit (see the module
    docstring); None when it may fit, or cannot be judged without tokenizing."""
    room = limit.room
    if room is None or limit.truncating or request.trace is not None:
        return None
    pipe = preparer.pipeline(request.model)
    per_token = max_token_chars(pipe.tokenizer)
    if per_token is None or _logged_chars(request) <= per_token * room:  # render only the suspicious ones
        return None
    text = pipe.renderer.render(request).text
    at_least = math.ceil(len(text) / (2 * per_token))
    return _skip(request.provenance, limit.reason(at_least, True, len(text))) if at_least > room else None


def _skip(prov: Any, reason: str) -> Skipped:
    line = f" (line {prov.line})" if getattr(prov, "line", None) not in (None, prov.record) else ""
    return Skipped(prov.source, prov.record, reason + line, bad=False)


def fitting_prompts(requests: Sequence[Request], preparer: Preparer, limit: ContextLimit,
                    max_prompt_tokens: int | None = None) -> tuple[list[Prompt], list[Request], list[Skipped]]:
    """(prompts that fit, in arrival order; the requests they came from, in input order;
    a skip per request that does not fit, in input order). Prompts are
    :func:`~prefixcache.replay.prompts.to_prompts` of the prepared requests."""
    skipped: dict[tuple[str, int, str, int], Skipped] = {}

    def prepared() -> Iterator[Prepared]:
        for r in requests:
            early = _too_long_untokenized(r, preparer, limit)
            if early is not None:
                skipped[(r.provenance.source, r.provenance.record, r.session, r.index)] = early
                continue
            yield preparer.prepare(r)

    prompts = []
    for p in to_prompts(prepared(), max_prompt_tokens):
        room = limit.room
        if room is not None and len(p.ids) > room:
            prov = next(r.provenance for r in requests if (r.session, r.index) == (p.session, p.request_index))
            skipped[(p.source, p.record, p.session, p.request_index)] = _skip(prov, limit.reason(len(p.ids)))
        else:
            prompts.append(p)
    key = {(r.provenance.source, r.provenance.record, r.session, r.index): r for r in requests}
    kept = [r for k, r in key.items() if k not in skipped]
    return prompts, kept, [skipped[k] for k in key if k in skipped]


def fit_passes(requests: Sequence[Request], new_preparer: Callable[[], Preparer], limit: ContextLimit,
               max_prompt_tokens: int | None, canonical: bool, preparer: Preparer | None = None
               ) -> tuple[dict[str, list[Prompt]], dict[str, list[Request]], list[Skipped]]:
    """``{"original": prompts}`` (and ``"canonical"``: the canonical forms' prompts, with
    ``canonical``) of the requests that fit, the same requests (input order; ``"canonical"``:
    their canonical forms), and a skip for each one that does not. A
    request runs in every pass or in none (passes are compared position by position): one
    whose canonical prompt does not fit is skipped too. ``preparer`` (else a fresh
    ``new_preparer()``) prepares the originals; each canonical try gets a fresh one.
    ConfigError when no request fits."""
    from prefixcache.analyzer.canonical.rewrite import canonicalize_requests

    original, kept, skipped = fitting_prompts(requests, preparer or new_preparer(), limit, max_prompt_tokens)
    prompts, sources = {"original": original}, {"original": kept}
    while canonical and kept:
        sources["canonical"] = canonicalize_requests(kept)
        canon, _, skips = fitting_prompts(sources["canonical"], new_preparer(), limit, max_prompt_tokens)
        prompts["canonical"] = canon
        if not skips:
            break
        drop = {(s.source, s.record) for s in skips}
        skipped += [replace(s, reason=s.reason.replace("prompt of", "canonical prompt of", 1)) for s in skips]
        kept = sources["original"] = [r for r in kept if (r.provenance.source, r.provenance.record) not in drop]
        prompts["original"] = [p for p in prompts["original"] if (p.source, p.record) not in drop]
    if skipped and not prompts["original"]:
        first = skipped[0]
        raise ConfigError(f"no replayable requests: all {len(skipped)} prompt(s) exceed the model's context of "
                          f"{limit.context:,} tokens; first {first.source}:{first.record}: {first.reason}")
    return prompts, sources, skipped
