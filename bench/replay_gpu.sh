#!/usr/bin/env bash
# Replay on CUDA with larger bounds than the CPU suite, and the replay speed bench.
# Not part of `make test`; run it on a machine with a GPU:
#   bash bench/replay_gpu.sh                 # default model (SmolLM2-135M-Instruct, float32)
#   MODEL=/path/to/hf-folder DTYPE=bfloat16 bash bench/replay_gpu.sh
# Prints the per-pass tables (cold / warm / canonical) and the bench ratios; writes
# per-request JSONL under ${OUT:-build/replay-gpu}. Exits non-zero on a verification
# mismatch or when the engine's cached tokens differ from the simulator's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
MODEL=${MODEL:-smollm2}
DTYPE=${DTYPE:-float32}
OUT=${OUT:-build/replay-gpu}
SAMPLES=${SAMPLES:-../shared/samples}
MAX_PROMPT=${MAX_PROMPT:-8000}
MAX_REQUESTS=${MAX_REQUESTS:-60}
DEVICE=${DEVICE:-cuda}   # DEVICE=cpu MAX_PROMPT=128 MAX_REQUESTS=3 makes a quick smoke run of this script
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
mkdir -p "$OUT"
[ "$DEVICE" = cpu ] || "$PY" -c "import torch, sys; ok = torch.cuda.is_available(); print('cuda:', ok, torch.cuda.get_device_name(0) if ok else ''); sys.exit(0 if ok else 3)" \
  || { echo "no CUDA device: this script is for a GPU machine" >&2; exit 3; }
replay() {  # name, inputs...
  local name=$1; shift
  echo "== replay $name"
  "$PY" -c "from prefixcache.cli.app import main; main()" replay "$@" --device "$DEVICE" --dtype "$DTYPE" --model "$MODEL" \
    --max-prompt-tokens "$MAX_PROMPT" --max-requests "$MAX_REQUESTS" --verify all --out "$OUT/$name.jsonl"
}
replay examples examples/agent_session.jsonl
if [ -d "$SAMPLES" ]; then
  replay swe-agent "$SAMPLES/swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
  replay mini-swe-agent "$SAMPLES"/mini_swe_agent_*.traj.json
  replay claude-code "$SAMPLES/claude_code_session_v1.0.98_fe5e1c67.jsonl"
fi
BENCH_PREFIX=${BENCH_PREFIX:-4096}
echo "== bench (prefix $BENCH_PREFIX cached + 256 computed)"
"$PY" bench/bench_replay.py --device "$DEVICE" --dtype "$DTYPE" ${MODEL:+--model "$MODEL"} --prefix "$BENCH_PREFIX" --suffix 256 --reps 10
echo "peak figures per request: $OUT/*.jsonl"
