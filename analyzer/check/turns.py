"""Turn N against turn N+1: the check that a template's prefix survives the next turn.

A prefix cache reuses turn N's prompt at turn N+1 only if turn N's rendered prompt (above
the ``{# prefixcache: dynamic-below #}`` boundary; all of it without one) is a prefix of
turn N+1's. Variations of one context cannot see a template line such as ``This is turn
{{ messages | length }}``: it is stable under every variation and changes every turn.

Pairs (:func:`turn_pairs`): a given context continues the previous one when its
``messages`` list starts with the previous context's ``messages`` (then the two are turn N
and turn N+1, as given); a context that no given context continues gets a derived next
turn: its ``messages`` with :data:`NEXT_TURN` appended (an assistant answer and a user
follow-up), everything else, the clock included, unchanged. Contexts without a
``messages`` list get no turn check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

#: The turn appended to derive turn N+1 from a context (an answer and a follow-up).
NEXT_TURN = ({"role": "assistant", "content": "Done: I made the change and the tests pass."},
             {"role": "user", "content": "Thanks. Now update the changelog."})


@dataclass(frozen=True, slots=True)
class TurnPair:
    """Turn N (``label``, ``context``) and turn N+1 (``next_label``, ``next_context``);
    ``derived`` is True when N+1 was made by appending :data:`NEXT_TURN`."""

    label: str
    context: Mapping[str, Any]
    next_label: str
    next_context: Mapping[str, Any]
    derived: bool


def _messages(context: Mapping[str, Any]) -> list | None:
    msgs = context.get("messages")
    return msgs if isinstance(msgs, list) else None


def continues(previous: Mapping[str, Any], context: Mapping[str, Any]) -> bool:
    """True when ``context``'s messages extend ``previous``'s (a later turn of the same conversation)."""
    a, b = _messages(previous), _messages(context)
    return a is not None and b is not None and len(b) > len(a) and b[: len(a)] == a


def next_turn(context: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``context`` with :data:`NEXT_TURN` appended to its messages (None without a messages list)."""
    msgs = _messages(context)
    if msgs is None:
        return None
    return {**context, "messages": [*msgs, *NEXT_TURN]}


def turn_pairs(contexts: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, TurnPair]:
    """Context label → its turn pair (see the module doc); contexts without messages have none."""
    out: dict[str, TurnPair] = {}
    for i, (label, ctx) in enumerate(contexts):
        if i + 1 < len(contexts) and continues(ctx, contexts[i + 1][1]):
            nxt_label, nxt = contexts[i + 1]
            out[label] = TurnPair(label, ctx, nxt_label, nxt, False)
            continue
        derived = next_turn(ctx)
        if derived is not None:
            out[label] = TurnPair(label, ctx, f"{label} + next turn", derived, True)
    return out
