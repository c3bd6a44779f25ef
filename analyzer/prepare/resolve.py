"""Which renderer and tokenizer each logged model gets: ``auto`` by model family, or as named.

Template names: ``auto``; ``chatml_tools`` / ``deepseek_v3`` / ``deepseek_v32`` (shipped in
``prefixcache.templates``); ``tokenizer`` (the chat template stored with the
tokenizer: tokenizer_config.json, chat_template.jinja or GGUF metadata);
``provider:openai``, ``provider:openai-harmony`` (chosen for OpenAI reasoning models:
:func:`harmony_model`), ``provider:anthropic``, ``provider:deepseek``; or a path to
a ``.jinja`` file. Tokenizer names: see :func:`prefixcache.analyzer.tokenize.get_tokenizer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.model import Request
from prefixcache.analyzer.render import JinjaRenderer, ProviderLayout, Renderer, load_template, shipped_templates
from prefixcache.analyzer.render.images import ImageText, gemini_generation
from prefixcache.analyzer.tokenize import Tokenizer, choose_auto, get_tokenizer
from prefixcache.analyzer.tokenize.backends import HFTokenizer


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A renderer and a tokenizer for one model; ``note`` says what was chosen and how exact it is."""

    renderer: Renderer
    tokenizer: Tokenizer
    note: str


def _special(tok: Tokenizer) -> dict[str, str | None]:
    cfg = tok.config if isinstance(tok, HFTokenizer) else {}
    return {k: cfg.get(k) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}


def _family(model: str | None) -> str:
    m = (model or "").lower()
    if "claude" in m:
        return "anthropic"
    if m.startswith(("gpt-", "o1", "o3", "o4", "chatgpt", "codex", "text-")):
        return "openai"
    if m.startswith("deepseek-chat") or m.startswith("deepseek-reasoner") or m in ("deepseek-v3", "deepseek/deepseek-chat"):
        return "deepseek"
    return ""


#: OpenAI model families rendered in the harmony framing (reasoning models; ``provider:openai-harmony``).
HARMONY_MODELS = ("gpt-5", "o1", "o3", "o4", "codex", "gpt-oss")


def harmony_model(model: str | None) -> bool:
    """Whether ``model`` (a logged name, ``azure/`` or ``openai/`` prefix allowed) is an OpenAI
    reasoning model that :func:`resolve` lays out in the harmony framing."""
    base = (model or "").lower().rsplit("/", 1)[-1]
    return base.startswith(HARMONY_MODELS)


def deepseek_thinking(model: str | None) -> bool:
    """Whether the DeepSeek API renders ``model`` in thinking mode (``deepseek-reasoner``,
    a ``-thinking`` / ``-r1`` name) rather than chat mode (``deepseek-chat``)."""
    m = (model or "").lower()
    return "reasoner" in m or "thinking" in m or m.endswith("-r1")


def _renderer(template: str, model: str | None, tok: Tokenizer) -> tuple[Renderer, str]:
    """The renderer named by ``template`` and a phrase describing it."""
    t = template
    if t == "auto":
        fam = _family(model)
        own = tok.config.get("chat_template") if isinstance(tok, HFTokenizer) else None
        if fam == "openai" and harmony_model(model):
            t = "provider:openai-harmony"
        elif fam in ("openai", "anthropic"):
            t = f"provider:{fam}"
        elif fam == "deepseek" or ("deepseek" in (model or "").lower() and not own):
            t = "provider:deepseek"
        elif isinstance(own, str) and own:
            t = "tokenizer"
        else:
            r = JinjaRenderer(load_template("chatml_tools"), "chatml_tools", _special(tok), exact=False, trusted=True)
            how = f"template chatml_tools (generic stand-in; {model or 'the model'}'s own template is unknown)"
            if gemini_generation(model) is not None:  # Google publishes its image counts: keep images in the text
                return ImageText(r), how[:-1] + "; images at Google's published counts)"
            return r, how
    if t in ("provider:openai-harmony", "openai-harmony"):
        r = ProviderLayout("openai-harmony")
        return r, (f"layout {r.name} (the harmony framing OpenAI published for gpt-oss; server rendering not "
                   "public, approximate)")
    if t in ("provider:openai", "openai", "provider:anthropic", "anthropic"):
        r = ProviderLayout(t.removeprefix("provider:"))
        return r, f"layout {r.name} (tools → system → messages; server rendering not public, approximate)"
    if t in ("provider:deepseek", "deepseek-api"):
        thinking = deepseek_thinking(model)
        r = JinjaRenderer(load_template("deepseek_v32"), "provider:deepseek", _special(tok),
                          extra={"thinking": thinking}, trusted=True)
        mode = "thinking mode" if thinking else "chat mode"
        return r, f"template deepseek_v32 ({mode}), the DeepSeek-V3.2 encoding the DeepSeek API renders"
    if t == "tokenizer":
        own = tok.config.get("chat_template") if isinstance(tok, HFTokenizer) else None
        if isinstance(own, list):  # named templates: take "default"
            own = next((x["template"] for x in own if x.get("name") == "default"), None)
        if not own:
            raise ConfigError(f"tokenizer {tok.name} carries no chat template; pass --template")
        return JinjaRenderer(own, f"{tok.name}:chat_template", _special(tok)), f"the chat template stored with {tok.name} (exact)"
    shipped = t in shipped_templates()  # the package's own templates render in-process, any other in the worker
    name = Path(t).stem if t.endswith(".jinja") else t
    return JinjaRenderer(load_template(t), name, _special(tok), trusted=shipped), f"template {name}"


def resolve(model: str | None, template: str = "auto", tokenizer: str = "auto") -> Pipeline:
    """Renderer + tokenizer for ``model`` (a logged model name, may be None).

    ``auto`` picks by model family (see :func:`choose_auto` and the module
    docstring) and the note says what it chose and whether token counts are exact.
    Raises :class:`ConfigError` for unknown template or tokenizer names.
    """
    tok = get_tokenizer(tokenizer, model)
    renderer, how = _renderer(template, model, tok)
    harmony = isinstance(renderer, ProviderLayout) and renderer.style == "openai-harmony"
    if harmony and tokenizer == "auto" and tok.name == "o200k_base":
        tok = get_tokenizer("o200k_harmony")  # o200k_base's ranks plus the special tokens the framing writes
    if tokenizer == "auto":
        choice = choose_auto(model)
        plus = " plus the harmony special tokens" if tok.name == "o200k_harmony" and choice.spec == "o200k_base" else ""
        tok_note = f"tokenizer {tok.name}: {choice.reason}{plus}"
    else:
        tok_note = f"tokenizer {tok.name}"
    exact = tok.exact and renderer.exact
    note = f"{model or 'unknown model'}: {how}; {tok_note}; counts {'exact' if exact else 'approximate'}"
    return Pipeline(renderer, tok, note)


def opaque_prefix_for(request: Request, message_tokens: int) -> int:
    """Approximate hidden-prefix length (tokens) of a request whose log lacks system and tools.

    ``max(0, usage.prompt_tokens - message_tokens)``: what the provider counted
    minus what we count for the logged messages. Approximate because our tokenizer
    and layout only approximate the provider's (Claude Code: cl100k vs Claude's
    tokenizer); 0 when the request reports no prompt tokens.
    """
    u = request.usage
    if u is None or u.prompt_tokens is None:
        return 0
    return max(0, int(u.prompt_tokens) - int(message_tokens))
