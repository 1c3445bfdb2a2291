#!/usr/bin/env bash
# What buddy copies cost a step (--fault.replicas, A/B interleaved in one run) and what they save
# when a node is lost:
#   overhead  the same job with --fault.recover=true and --fault.replicas=0 (no copy: the
#             baseline) and =1 (every piece without a data-parallel replica on another process
#             copied to the next process: its gradient every step, its state once), for
#               mlp pp2  --data.name=synth 784-1024-1024-10, AdamW, batch 256, 2 micro-batches,
#                        --plan.pp=2 over 2 processes (1 thread each), 200 timed steps
#               mlp tp2  the same with --plan.tp=2
#               gpt pp2  4 layers, d 128, 4 heads, seq 64, batch 16, --plan.pp=2 --plan.micro-batches=4
#             and the ratio of samples (tokens) per second, copies / none (goal: >= 0.95)
#   loss      mlp pp2 with process 1 SIGKILLed after step 119, a checkpoint every 50 steps:
#             restored from the buddy copy (one step redone) against the checkpoint fallback
#             (--fault.replicas=0: the steps since step 100 redone); wall time and steps redone
#   bench/replicas.sh [ROUNDS]     (default 5)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}
out="$root/bench/results/replicas-$(date +%Y%m%d-%H%M%S).jsonl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mlp=(--data.name=synth --model.dims=784,1024,1024,10 --train.batch=256 --train.steps=210 --train.warmup=10
     --train.optimizer=adamw --train.lr=0.001 --plan.micro-batches=2 --launch.nproc=2 --plan.refit=false
     --fault.recover=true)
gpt=(--model.layers=4 --model.d=128 --model.heads=4 --model.seq=64 --train.batch=16 --train.steps=110
     --train.warmup=10 --plan.pp=2 --plan.micro-batches=4 --launch.nproc=2 --plan.refit=false --fault.recover=true)
timed() {  # timed SIDE CONFIG COMMAND...: one JSON line with the wall time and the summary
  local side=$1 config=$2; shift 2
  local t0 t1 line
  t0=$(date +%s.%N)
  line=$("$@" 2>"$work/err" | tail -n 1) || true
  t1=$(date +%s.%N)
  [ -n "$line" ] || line='{"error": "no output"}'
  echo "{\"side\":\"$side\",\"model\":\"loss\",\"config\":\"$config\",\"round\":$r,\"wall_s\":$(echo "$t1 - $t0" | bc),\"result\":$line}" \
    | tee -a "$out"
}
for ((r = 1; r <= rounds; r++)); do
  for n in 0 1; do
    side=none; [ $n = 1 ] && side=copies
    run $side mlp pp2 "$root/build/apps/mlp" "${mlp[@]}" --plan.pp=2 --fault.replicas=$n
    run $side mlp tp2 "$root/build/apps/mlp" "${mlp[@]}" --plan.tp=2 --plan.micro-batches=1 --fault.replicas=$n
    run $side gpt pp2 "$root/build/apps/gpt" "${gpt[@]}" --fault.replicas=$n
  done
  for n in 0 1; do
    side=checkpoint; [ $n = 1 ] && side=copies
    rm -rf "$work/ck"
    timed $side pp2-kill "$root/build/apps/mlp" "${mlp[@]}" --plan.pp=2 --train.steps=300 --fault.replicas=$n \
      --checkpoint.dir="$work/ck" --checkpoint.every=50 --fault.signal=KILL --fault.signal-rank=1 --fault.signal-step=119
  done
done
table none
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l).get("model") == "loss"]
for side in ("copies", "checkpoint"):
    v = [r for r in rows if r["side"] == side and r["result"].get("recoveries")]
    if not v: continue
    rec = [r["result"]["recoveries"][0] for r in v]
    print(f"kill after step 119, {side:10}: wall {statistics.median(r['wall_s'] for r in v):6.2f} s, "
          f"recover {statistics.median(x['recover_s'] for x in rec):.3f} s, "
          f"steps redone {statistics.median(x['steps_redone'] for x in rec):.0f} "
          f"({len(v)} runs, sources {sorted({x['source'] for x in rec})})")
PY
