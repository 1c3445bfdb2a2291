#!/usr/bin/env bash
# Serial speed against PyTorch on this machine, interleaved in one run (ABAB...):
#   mlp  --data.name=synth, 784-1024-1024-10, batch 128, 200 timed steps after 10 warm-up,
#        plain SGD lr 0.05            vs ../shared/bench/mlp_torch.py --mode synth
#   gpt  on GPL-3 (d=256, 4 layers, 4 heads, seq 128, batch 16, AdamW), 30 timed steps
#        after 3 warm-up              vs ../shared/bench/gpt_torch.py
# at 1 and 2 threads (compute + BLAS for both sides), REPS rounds (default 3).
# Prints one JSON line per run and a table of medians with the ratio cohort/PyTorch.
#   bench/serial.sh [REPS]          results also go to bench/results/serial-<date>.jsonl
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peers=${COHORT_PEERS:-$root/../shared/bench}
reps=${1:-3}
py=/usr/bin/python3
[ -f "$peers/mlp_torch.py" ] || { echo "bench: peer scripts not found in $peers (set COHORT_PEERS)" >&2; exit 2; }
bash "$root/scripts/install-deps.sh" --bench >/dev/null
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" --target mlp gpt >/dev/null
mkdir -p "$root/bench/results"
out="$root/bench/results/serial-$(date +%Y%m%d-%H%M%S).jsonl"
gpl=/usr/share/common-licenses/GPL-3

run() {  # run SIDE MODEL THREADS COMMAND...
  local side=$1 model=$2 threads=$3; shift 3
  local line
  line=$("$@" 2>/dev/null | tail -n 1)
  echo "{\"side\":\"$side\",\"model\":\"$model\",\"threads\":$threads,\"result\":$line}" | tee -a "$out"
}

for ((r = 1; r <= reps; r++)); do
  for t in 1 2; do
    run cohort mlp $t "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
      --train.batch=128 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
      --train.threads=$t
    run torch mlp $t $py "$peers/mlp_torch.py" --mode synth --threads $t
    run cohort gpt $t "$root/build/apps/gpt" --data.file=$gpl --train.steps=33 --train.warmup=3 --train.threads=$t
    run torch gpt $t $py "$peers/gpt_torch.py" $gpl --threads $t
  done
done

$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def rate(r):
    res = r["result"]
    return res.get("samples_per_s") or res.get("tokens_per_s")
print()
print(f"{'model':5} {'threads':>7} {'cohort median':>14} {'torch median':>13} {'ratio':>6}  {'cohort best':>11} {'torch best':>10}  unit")
for model, unit in (("mlp", "samples/s"), ("gpt", "tokens/s")):
    for t in (1, 2):
        c = [rate(r) for r in rows if r["side"] == "cohort" and r["model"] == model and r["threads"] == t]
        p = [rate(r) for r in rows if r["side"] == "torch" and r["model"] == model and r["threads"] == t]
        if not c or not p:
            continue
        cm, pm = statistics.median(c), statistics.median(p)
        print(f"{model:5} {t:>7} {cm:>14.0f} {pm:>13.0f} {cm / pm:>6.2f}  {max(c):>11.0f} {max(p):>10.0f}  {unit}")
print(f"\nruns: {sys.argv[1]}")
PY
