#!/usr/bin/env bash
# Replay on CUDA with larger bounds than the CPU suite, and the replay speed bench.
# Not part of `make test`; run it on a machine with a GPU and a CUDA build of torch
# (`make setup` installs the CPU build):
#   bash bench/replay_gpu.sh                 # default model (SmolLM2-135M-Instruct, float32)
#   MODEL=/path/to/hf-folder DTYPE=bfloat16 bash bench/replay_gpu.sh
# Prints the per-pass tables (cold / warm / canonical), the bench ratios and the restore-vs-recompute
# calibration (`prefixcache calibrate`: pinned and pageable host memory, disk); writes per-request JSONL and
# calibration.json (for `simulate --tiers … --calibrate FILE`) under ${OUT:-build/replay-gpu}. Every step runs even when an earlier
# one fails; a summary of the steps' exit codes ends the output, and the script exits
# non-zero when any step failed (a verification mismatch or cached tokens that differ
# from the simulator's exit 1), or when the real samples (SAMPLES) are missing.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
MODEL=${MODEL:-smollm2}
DTYPE=${DTYPE:-float32}
OUT=${OUT:-build/replay-gpu}
SAMPLES=${SAMPLES:-tests/fixtures/samples}
MAX_PROMPT=${MAX_PROMPT:-8000}
MAX_REQUESTS=${MAX_REQUESTS:-60}
DEVICE=${DEVICE:-cuda}   # DEVICE=cpu MAX_PROMPT=128 MAX_REQUESTS=3 makes a quick smoke run of this script
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
mkdir -p "$OUT"

if [ "$DEVICE" != cpu ]; then
  "$PY" - <<'EOF'
import sys
import torch
if torch.version.cuda is None:
    print(f"torch {torch.__version__} is a CPU-only build: this script needs a CUDA build of torch "
          "in the same environment (install one with pip, from the CUDA wheel index matching your driver)",
          file=sys.stderr)
    sys.exit(3)
if not torch.cuda.is_available():
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device: run this on a GPU machine",
          file=sys.stderr)
    sys.exit(3)
print("cuda:", torch.cuda.get_device_name(0), "torch", torch.__version__, "CUDA", torch.version.cuda)
EOF
  [ $? -eq 0 ] || exit 3
fi

# Cap the prompt bound by the model's context (one token is left for the first output token).
CONTEXT=$("$PY" - "$MODEL" <<'EOF'
import sys
from transformers import AutoConfig
from prefixcache.replay.engine.hf import resolve_model_path
path = resolve_model_path(sys.argv[1])[0]
cfg = AutoConfig.from_pretrained(path).get_text_config(decoder=True)
print(int(getattr(cfg, "max_position_embeddings", 0) or 0))
EOF
) || { echo "cannot read the context length of model $MODEL" >&2; exit 2; }
if [ "${CONTEXT:-0}" -gt 1 ] && [ "$MAX_PROMPT" -ge "$CONTEXT" ]; then
  echo "MAX_PROMPT $MAX_PROMPT capped to $((CONTEXT - 1)) (model context $CONTEXT tokens)"
  MAX_PROMPT=$((CONTEXT - 1))
fi

STEPS=()
CODES=()
record() {  # name, exit code
  STEPS+=("$1"); CODES+=("$2")
}
replay() {  # name, inputs...
  local name=$1; shift
  echo "== replay $name"
  "$PY" -c "from prefixcache.cli.app import main; main()" replay "$@" --device "$DEVICE" --dtype "$DTYPE" --model "$MODEL" \
    --max-prompt-tokens "$MAX_PROMPT" --max-requests "$MAX_REQUESTS" --verify all --template chatml_tools \
    --out "$OUT/$name.jsonl" --force
  record "replay $name" $?
}
sample() {  # name, paths...: replay real samples, or record them as missing
  local name=$1; shift
  if [ -e "$1" ]; then
    replay "$name" "$@"
  else
    echo "== replay $name: MISSING $1 (set SAMPLES to the folder of the real samples)" >&2
    record "replay $name (missing $1)" 4
  fi
}

replay examples examples/agent_session.jsonl
sample swe-agent "$SAMPLES/swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
sample mini-swe-agent "$SAMPLES"/mini_swe_agent_*.traj.json
sample claude-code "$SAMPLES/claude_code_session_v1.0.98_fe5e1c67.jsonl"
BENCH_PREFIX=${BENCH_PREFIX:-4096}
echo "== bench (prefix $BENCH_PREFIX cached + 256 computed)"
"$PY" bench/bench_replay.py --device "$DEVICE" --dtype "$DTYPE" ${MODEL:+--model "$MODEL"} --prefix "$BENCH_PREFIX" --suffix 256 --reps 10
record bench $?

CAL_LENGTHS=${CAL_LENGTHS:-256,512,1024,2048,4096,8192}
echo "== calibrate (prefill vs KV restore from pinned/pageable host memory and disk: $OUT/calibration.json)"
"$PY" -c "import sys; from prefixcache.cli.app import main; sys.exit(main())" calibrate --device "$DEVICE" --dtype "$DTYPE" ${MODEL:+--model "$MODEL"} \
  --lengths "$CAL_LENGTHS" --repeat 5 --out "$OUT/calibration.json" --force
record calibrate $?

echo "== summary (per-request figures: $OUT/*.jsonl)"
failed=0
for i in "${!STEPS[@]}"; do
  status=ok
  [ "${CODES[$i]}" -eq 0 ] || { status="FAILED (exit ${CODES[$i]})"; failed=1; }
  printf '  %-60s %s\n' "${STEPS[$i]}" "$status"
done
exit $failed
