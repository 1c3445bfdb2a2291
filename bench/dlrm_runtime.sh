#!/usr/bin/env bash
# DLRM on the actor runtime: sparse table gradients (gathered over dp, the touched rows updated
# by the parameter actors) against dense ones (--model.sparse=false: a [rows, dim] gradient per
# table, allreduced and applied whole), beside the serial trainer and PyTorch, interleaved in
# one run on criteo_synth.py's check pair (tables capped at 100,000 rows; the Kaggle
# architecture), B=128, plain SGD lr 0.1, 1,500 timed steps after 20 warm-up:
#   serial           --plan.mode=serial, 1 thread (sparse)
#   dp1 sparse/dense --plan.dp=1, 1 thread
#   dp2 sparse/dense --plan.dp=2, one thread per replica (the machine's 2 cores)
#   tp2 rows         --plan.tp=2 --model.table-sharding=row (each core holds half of every table)
#   torch            ../shared/bench/dlrm_torch.py --batch 128 --threads 1
# Prints one JSON line per run and a table of medians with the ratio to PyTorch.
#   bench/dlrm_runtime.sh [REPS]   (default 3; results in bench/results/dlrm-runtime-<date>.jsonl)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
out="$root/bench/results/dlrm-runtime-$(date +%Y%m%d-%H%M%S).jsonl"
cmake --build "$root/build" --target dlrm >/dev/null
criteo_check_pair
job=("$root/build/apps/dlrm" --data.file="$data/check_train.tsv" --data.test-file="$data/check_test.tsv"
  --train.batch=128 --train.steps=1520 --train.warmup=20)
for ((r = 1; r <= reps; r++)); do
  run cohort dlrm "serial" "${job[@]}" --train.threads=1 --plan.mode=serial
  run cohort dlrm "dp1 sparse" "${job[@]}" --train.threads=1 --plan.dp=1
  run cohort dlrm "dp1 dense" "${job[@]}" --train.threads=1 --plan.dp=1 --model.sparse=false
  run cohort dlrm "dp2 sparse" "${job[@]}" --train.threads=2 --plan.dp=2
  run cohort dlrm "dp2 dense" "${job[@]}" --train.threads=2 --plan.dp=2 --model.sparse=false
  run cohort dlrm "tp2 rows" "${job[@]}" --train.threads=2 --plan.tp=2 --model.table-sharding=row
  run torch dlrm "torch 1 thread" $py "$peers/dlrm_torch.py" --data "$data/check_train.tsv" \
    --test-data "$data/check_test.tsv" --batch 128 --steps 1500 --warmup 20 --threads 1
done
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
torch = statistics.median(r["result"]["samples_per_s"] for r in rows if r["side"] == "torch")
print(f"\n{'config':16} {'samples/s':>10} {'vs torch':>9} {'test AUC':>9}")
for cfg in dict.fromkeys(r["config"] for r in rows):
    got = [r["result"] for r in rows if r["config"] == cfg and "samples_per_s" in r["result"]]
    if not got: continue
    m = statistics.median(g["samples_per_s"] for g in got)
    auc = statistics.median(g.get("test_auc", float("nan")) for g in got)
    print(f"{cfg:16} {m:10.0f} {m / torch:9.2f} {auc:9.4f}")
print(f"\nruns: {sys.argv[1]}")
PY
