"""Lint throughput on the largest text sample, next to the raw tokenizer on the same text.

Prints, measured in one run on this machine:
  * lint alone (radix index + divergence location + rules) over already prepared
    requests: requests/s and prompt tokens/s;
  * end to end (ingest + render + incremental tokenize + lint): requests/s, tokens/s;
  * the tokenizer encoding every rendered prompt from scratch (what a naive linter
    would do): tokens/s;
and the ratios between them, as CPU-time ratios over the same requests. Every figure is the
median CPU seconds (``time.process_time`` plus the render worker's, which Jinja renders run in) of the same number of rounds, run interleaved (one of
each per round, after one untimed warm-up round of each), so a cold first run or a load change on a
shared machine does not land on one side only. Prompt tokens
include the pseudo-tokens that stand in for a hidden prefix (Claude Code's system
prompt and tools, sized from the logged usage); "text tokens" are those the
tokenizer actually encodes. Usage-only requests (no prompt logged) are not counted.

Usage: python bench/bench_lint.py [--rounds 5] [LOG ...]  or  [--rounds 3] --big MB [--executor ray]   (default: the largest file in
tests/fixtures/samples that holds prompt text, i.e. not a block-hash trace)

``--big MB`` (issue 25 item 3) builds an agent log of about MB megabytes at bench time (copies of the
shared SWE-agent and Claude Code samples, each with its own session and a varied task text, so no two
sessions share more than the template's system prompt) and times ``inspect --json`` and ``lint --json``
on it as a user runs them (``python -m prefixcache``, CPU seconds of the command and its children,
the render worker included), next to the ideal incremental cost: the tokenizer encoding only each
request's new text (what follows the common prefix with its session's previous prompt), measured on
the same prompts, in interleaved rounds (every run a fresh process: cold against cold). Goal: each command within 3x of the ideal. ``--executor ray`` adds lint with that
executor (item 6).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import interleaved  # noqa: E402

from prefixcache.analyzer.ingest import Ingest  # noqa: E402
from prefixcache.analyzer.lint.engine import Linter  # noqa: E402
from prefixcache.analyzer.prepare import Preparer  # noqa: E402
from prefixcache.analyzer.render import worker as render_worker  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "samples"
TRACES = ("mooncake", "kvcache_tester")


def default_inputs() -> list[str]:
    logs = [p for p in SAMPLES.iterdir() if p.is_file() and p.suffix != ".md" and not p.name.startswith(TRACES)]
    return [str(max(logs, key=lambda p: p.stat().st_size))]


def cpu() -> float:
    """CPU seconds of this process and of its render worker (Jinja renders run there, ``render/worker.py``)."""
    return time.process_time() + render_worker.cpu_seconds()


def main(argv: list[str]) -> None:
    rounds = 5
    if argv[:1] == ["--rounds"]:
        rounds, argv = int(argv[1]), argv[2:]
    if argv[:1] == ["--big"]:
        return big(float(argv[1]), argv[2:], rounds)
    inputs = argv or default_inputs()
    preps, preparer = _prepare(inputs)
    requests = len(preps)
    tokens = sum(len(p.tokens.ids) for p in preps if p.tokens is not None)
    text_tokens = tokens - sum(p.tokens.opaque_prefix_tokens for p in preps if p.tokens is not None)

    def lint_all():
        return _lint(preps)

    tokenizers = {id(preparer.pipeline(p.request.model).tokenizer): preparer.pipeline(p.request.model).tokenizer
                  for p in preps if p.rendered is not None}

    def encode_all():
        n = 0
        for p in preps:
            if p.rendered is not None:
                n += len(preparer.pipeline(p.request.model).tokenizer.encode(p.rendered.text))
        return n

    t, out = interleaved({"e2e": lambda: _lint(_prepare(inputs)[0]), "lint": lint_all, "tok": encode_all}, rounds,
                         clock=cpu)
    t_e2e, t_lint, t_tok, linter, encoded = t["e2e"], t["lint"], t["tok"], out["lint"], out["tok"]
    print(f"median CPU seconds of {rounds} interleaved rounds")
    print(f"input: {', '.join(Path(i).name for i in inputs)}")
    print(f"  {requests:,} requests, {tokens:,} prompt tokens ({text_tokens:,} text tokens, "
          f"{tokens - text_tokens:,} hidden-prefix pseudo-tokens), {len(linter.sessions)} sessions, "
          f"tokenizer(s): {', '.join(t.name for t in tokenizers.values())}")
    print(f"  reusable {linter.total.reusable_tokens:,} tokens ({linter.total.reusable_fraction:.1%}), "
          f"{sum(linter.total.findings_by_code.values())} findings")
    print(f"{'':31}{'CPU':>11}  {'requests/s':>12}  {'prompt tok/s':>14}  {'text tok/s':>14}")
    for label, t in (("lint only (prepared requests):", t_lint), ("ingest+render+tokenize+lint:", t_e2e),
                     ("tokenizer, full re-encode:", t_tok)):
        print(f"{label:31}{t * 1e3:8.1f} ms  {requests / t:12,.0f}  {tokens / t:14,.0f}  {text_tokens / t:14,.0f}")
    print(f"  (the tokenizer encoded {encoded:,} tokens: every rendered prompt, from scratch)")
    print(f"speed-up lint / raw tokenizer (same requests): {t_tok / t_lint:.1f}x")
    print(f"speed-up end-to-end / raw tokenizer (same requests): {t_tok / t_e2e:.2f}x")


def _lint(preps) -> Linter:
    linter = Linter()
    for _ in linter.run(preps):
        pass
    return linter


def _prepare(inputs: list[str]):
    preparer = Preparer()
    preps = [preparer.prepare(r) for r in Ingest(inputs)]
    return preps, preparer


SWE = SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
CLAUDE = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
CLAUDE_SESSION = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"


def build_big_log(folder: Path, megabytes: float) -> list[Path]:
    """Copies of the SWE-agent and Claude Code samples in ``folder`` until about ``megabytes`` MB: each
    copy is its own session (its own file name, a new Claude ``sessionId``) with the task text varied
    by its number. Returns the files written."""
    swe, claude = SWE.read_text(), CLAUDE.read_text()
    files, size, k = [], 0, 0
    while size < megabytes * 1e6:
        if k % 2 == 0:
            text, name = swe.replace("marshmallow", f"marshmallow{k}"), f"swe_{k:05d}.traj"
        else:
            sid = f"{k:08d}-0000-4000-8000-000000000000"
            text, name = claude.replace(CLAUDE_SESSION, sid).replace("TODO app", f"TODO app {k}"), f"claude_{k:05d}.jsonl"
        path = folder / name
        path.write_text(text)
        files.append(path)
        size += len(text.encode())
        k += 1
    return files


def _command_cpu(args: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) of ``python -m prefixcache ARGS`` and its waited-for children, and its
    wall seconds; output discarded. (Ray's workers are not its children: for ``--executor ray`` the
    wall clock is the figure.)"""
    import resource
    import subprocess

    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    rc = subprocess.run([sys.executable, "-m", "prefixcache", *args], stdout=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    if rc not in (0, 1):
        raise SystemExit(f"prefixcache {' '.join(args[:1])} exited {rc}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def ideal_incremental(files: list[Path]) -> tuple[float, int, int]:
    """CPU seconds of the tokenizer encoding only each request's new text (after the common prefix with
    its session's previous prompt), the tokens that gives and the new characters; prompts prepared once."""
    from prefixcache.analyzer.sequence import common_prefix_len

    preparer = Preparer()
    new: list[tuple[object, str]] = []
    last: dict[str, str] = {}
    for p in (preparer.prepare(r) for r in Ingest([str(f) for f in files])):
        if p.rendered is None:
            continue
        text, prev = p.rendered.text, last.get(p.request.session, "")
        new.append((preparer.pipeline(p.request.model).tokenizer, text[common_prefix_len(prev, text):]))
        last[p.request.session] = text
    t0 = time.process_time()
    n = sum(len(tok.encode(t)) for tok, t in new)
    return time.process_time() - t0, n, sum(len(t) for _, t in new)


def big(megabytes: float, argv: list[str], rounds: int = 3) -> None:
    import tempfile

    executor = argv[1] if argv[:1] == ["--executor"] else None
    with tempfile.TemporaryDirectory(prefix="bench-lint-big-") as tmp:
        files = build_big_log(Path(tmp), megabytes)
        mb = sum(f.stat().st_size for f in files) / 1e6
        ideal, tokens, chars = ideal_incremental(files)
        print(f"input: {len(files)} files, {mb:.1f} MB (copies of {SWE.name} and {CLAUDE.name})")
        print(f"ideal incremental tokenization: {ideal:.2f} s CPU ({tokens:,} new tokens, {chars:,} new characters)")
        runs = {"inspect": ["inspect", tmp, "--json"], "lint": ["lint", tmp, "--json"]}
        if executor:
            runs[f"lint --executor {executor}"] = ["lint", tmp, "--json", "--executor", executor]
        cpus: dict[str, list[float]] = {k: [] for k in runs}
        walls: dict[str, list[float]] = {k: [] for k in runs}
        print(f"load average before: {os.getloadavg()[0]:.2f} (other jobs on the machine); "
              f"{rounds} interleaved rounds (each command once per round, every run a fresh process)")
        for _ in range(rounds):
            for label, args in runs.items():
                c, w = _command_cpu(args)
                cpus[label].append(c)
                walls[label].append(w)
        wall = {k: statistics.median(v) for k, v in walls.items()}
        for label in runs:
            cpu_s = statistics.median(cpus[label])
            print(f"{label:>24}: {cpu_s:7.2f} s CPU, {wall[label]:7.2f} s wall (medians), {mb / cpu_s:5.1f} MB/s, "
                  f"{cpu_s / ideal:5.2f}x the ideal (goal <= 3x)")
        if executor:
            print(f"speed-up of lint with --executor {executor} (wall clock, Ray start-up included): "
                  f"{wall['lint'] / wall[f'lint --executor {executor}']:.2f}x (goal >= 1.7x on 2 workers; "
                  f"bench/bench_executor.py measures it on a cluster already up); "
                  f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
