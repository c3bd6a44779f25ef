"""Who controls what a fix changes: the advice of a finding depends on it.

A rule's ``fix`` is written for someone who builds the prompt and serves the model. Three
parties can hold those levers, and advice must go to the one that does:

* **self-hosted engine** (vLLM, SGLang, llama.cpp: a model name no hosted family
  matches): the user runs the chat template and the tokenizer; every fix applies as written.
* **hosted API** (OpenAI, Anthropic, DeepSeek: :data:`~.provider.HOSTED_FAMILIES`): the
  provider renders and tokenizes server-side. Template and tokenizer findings (PC5xx) are
  not the user's to fix: "choose another template" is replaced by what the user can do.
* **agent harness** (Claude Code, Codex, SWE-agent, mini-swe-agent, OpenHands logs): the
  agent builds the prompt; a user of the agent changes its configuration or reports the
  behaviour upstream, and only the agent's developers can apply a code fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixcache.analyzer.model import Request
from prefixcache.analyzer.lint.rules.provider import HOSTED_FAMILIES

#: Reader formats whose prompts an agent harness builds, with the agent's name.
HARNESS_FORMATS = {"claude-code": "Claude Code", "codex": "Codex", "swe-agent": "SWE-agent",
                   "mini-swe-agent": "mini-swe-agent", "openhands": "OpenHands"}
#: Rule codes whose fix is on the serving side (template, tokenizer).
SERVING_CODES = frozenset({"PC501", "PC502", "PC503"})


@dataclass(frozen=True, slots=True)
class Control:
    """Who builds and who serves a request: ``harness`` (agent name, None when the user's own
    client sent it) and ``provider`` (hosted provider name, None for a self-hosted or unknown
    engine)."""

    harness: str | None
    provider: str | None


def control_of(request: Request) -> Control:
    """The :class:`Control` of one request, from its reader format and model name."""
    provider = None
    name = (request.model or "").rsplit("/", 1)[-1]
    for pattern, _key, label in HOSTED_FAMILIES:
        if name and pattern.search(name):
            provider = label
            break
    return Control(HARNESS_FORMATS.get(request.format), provider)


_HOSTED = {
    "PC501": "{p} renders prompts server-side: its template is not yours to choose. Send earlier turns back exactly "
             "as the API returned them (reasoning included where the API accepts it), or accept the miss.",
    "PC502": "{p} tokenizes server-side: nothing to change on your side (a few tokens at each seam).",
    "PC503": "Nothing to change in your requests: {p} renders prompts server-side with a template you cannot "
             "choose. The warning concerns the template prefixcache counted with; --template changes only the "
             "figures.",
}


#: Codes whose finding is only a note on the figures when a hosted provider renders the prompt:
#: the user has nothing to change (the advice says so), so they never fail CI by default.
NOTHING_TO_CHANGE_HOSTED = frozenset({"PC503"})


def control_severity(code: str, severity: str, control: Control) -> str:
    """The severity of a ``code`` finding for whoever holds the lever: ``info`` where the
    advice is "nothing to change in your requests" (:data:`NOTHING_TO_CHANGE_HOSTED` on a
    hosted API), else ``severity`` as the rule set it."""
    return "info" if code in NOTHING_TO_CHANGE_HOSTED and control.provider is not None else severity


def advice(code: str, fix: str, control: Control) -> str:
    """The fix of a ``code`` finding for whoever holds the lever (see the module doc)."""
    if code in SERVING_CODES:
        return _HOSTED[code].format(p=control.provider) if control.provider is not None else fix
    if control.harness is not None:
        return (f"{control.harness} builds this prompt: change its configuration or report it to its "
                f"maintainers. In the agent's code: {fix}")
    return fix
