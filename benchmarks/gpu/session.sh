#!/usr/bin/env bash
# One short session on a machine with one NVIDIA GPU (benchmarks/gpu/README.md): the
# transformer campaign (memory measured against plan's prediction, tokens/s, MFU), the ResNet-50
# campaign (fp32 and the shipped settings: throughput, MFU, telemetry, the pre-flight), then
# gpu_vs_bare.py for what time is left. Each part is time-boxed; everything lands in $OUT.
#   OUT=/tmp/out DDLBENCH_TORCH_VENV=/path/to/venv bash benchmarks/gpu/session.sh [SECONDS [PARTS]]
# PARTS: a comma-separated choice of lm, lm1b, resnet, busy, bare, compiled (default: lm, resnet,
# busy, bare); they run in that order. lm1b: the mpt-1b campaign; compiled: gpu_vs_bare.py with
# torch.compile on for the shipped ResNet-50 settings (amp, channels_last).
set -u
BUDGET=${1:-480}
PARTS=,${2:-lm,resnet,busy,bare},
part() { case $PARTS in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
OUT=${OUT:-/tmp/ddlbench-gpu-out}
mkdir -p "$OUT"
export RESULTS=${RESULTS:-/tmp/gpu-results}
export PYTHONUNBUFFERED=1
DDL="python3 -m ddlbench"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} 2>&1 | tee "$OUT/versions.txt"

campaign() {  # spec, seconds
  local spec=$1 secs=$2 name
  name=$(python3 -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$spec")
  timeout "$secs" $DDL submit "$spec" --cluster benchmarks/gpu/one-gpu.yaml --results "$RESULTS" \
    && timeout "$secs" $DDL wait "$name" --results "$RESULTS" --timeout "$secs"
  # runs still going past the time box would share the GPU with the next part: stop them
  $DDL cancel "$name" --results "$RESULTS" >/dev/null 2>&1
  $DDL report "$name" --results "$RESULTS" -q
  $DDL status "$name" --results "$RESULTS"
}

if part lm; then
  echo "== transformer ($(left) s left)"
  campaign benchmarks/gpu/gpt2-one-gpu.yaml "${LM_SECONDS:-200}" 2>&1 | tee "$OUT/gpt2.txt"
fi

if part lm1b; then
  echo "== transformer, ~1.3 B parameters ($(left) s left)"
  campaign benchmarks/gpu/mpt1b-one-gpu.yaml "${LM1B_SECONDS:-200}" 2>&1 | tee "$OUT/mpt1b.txt"
fi

if part resnet; then
  echo "== resnet50 ($(left) s left)"
  sed -e 's/^repeats: 2/repeats: 1/' -e '/label: bf16-cl-compile/,+3d' \
    benchmarks/gpu/resnet50-one-gpu.yaml > /tmp/resnet50-one-gpu.yaml
  campaign /tmp/resnet50-one-gpu.yaml 200 2>&1 | tee "$OUT/resnet50.txt"
fi

if part busy; then
echo "== busy GPU at start ($(left) s left)"
python3 -c "import torch,time; x=torch.ones(1<<28,device='cuda'); time.sleep(120)" &
HOLDER=$!
sleep 8
python3 - <<'PY' 2>&1 | tee "$OUT/preflight.txt"
import json
from ddlbench.workloads.node import preflight
report = preflight.check("warn")
print(json.dumps({k: report[k] for k in ("gpu", "health", "reasons", "busy")}, indent=1))
PY
kill $HOLDER 2>/dev/null
fi

M=$RESULTS/measurements.jsonl
if part bare && [ "$(left)" -gt 60 ]; then
  echo "== gpu_vs_bare ($(left) s left)"
  timeout $(( $(left) - 20 )) python3 benchmarks/gpu_vs_bare.py --results "$M" --rounds "${BARE_ROUNDS:-1}" \
    --compile off --precisions "${BARE_PRECISIONS:-amp,bf16,fp32}" \
    --layouts "${BARE_LAYOUTS:-channels_last,default}" \
    --budget-s $(( $(left) - 70 )) 2>&1 | tail -30 | tee "$OUT/bare.txt"
  python3 benchmarks/gpu_vs_bare.py --results "$M" --report-only --json "$OUT/bare.json" \
    >> "$OUT/bare.txt" 2>&1
fi
if part compiled && [ "$(left)" -gt 90 ]; then
  echo "== gpu_vs_bare, compiled ($(left) s left)"
  timeout $(( $(left) - 15 )) python3 benchmarks/gpu_vs_bare.py --results "$M" --rounds 1 \
    --compile on --precisions amp --layouts channels_last --budget-s $(( $(left) - 80 )) \
    2>&1 | tail -30 | tee "$OUT/compiled.txt"
  python3 benchmarks/gpu_vs_bare.py --results "$M" --report-only --json "$OUT/bare.json" \
    >> "$OUT/compiled.txt" 2>&1
fi
tar czf "$OUT/results.tgz" -C "$RESULTS" --exclude='*.svg' . 2>/dev/null
ls -la "$OUT"
