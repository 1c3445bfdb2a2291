#!/usr/bin/env bash
# The heterogeneous pipeline against data parallelism and PyTorch on this machine's 2 cores
# (issue 19 item 9), interleaved in one run on criteo_synth.py's check pair (200,000 / 20,000
# samples, tables capped at 100,000 rows, the Kaggle architecture), B=128, plain SGD lr 0.1,
# STEPS timed steps after 20 warm-up (default 10,000: 6.4 passes over the file, where the test
# AUC passes 0.70), REPS rounds of:
#   hetero  --exec.mode=hetero, dp1 pp2 m4 (its default at B=128): the lookups, the tables and the bottom MLP on one
#           core, the interaction and the top MLP on the other (--train.threads=2)
#   dp2     two data-parallel replicas, sync tables (--train.threads=2)
#   torch   ../shared/bench/dlrm_torch.py --threads 2
# Prints one JSON line per run and a table: samples/s, the training wall time (timed steps'
# samples over samples/s), test AUC, and each side's time against PyTorch's.
#   bench/dlrm_hetero.sh [REPS] [STEPS]   (default 2, 10000; results in bench/results/dlrm-hetero-<date>.jsonl)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-2}
steps=${2:-10000}
out="$root/bench/results/dlrm-hetero-$(date +%Y%m%d-%H%M%S).jsonl"
cmake --build "$root/build" --target dlrm >/dev/null
criteo_check_pair
job=("$root/build/apps/dlrm" --data.file="$data/check_train.tsv" --data.test-file="$data/check_test.tsv"
  --train.batch=128 --train.steps=$((steps + 20)) --train.warmup=20 --train.threads=2 --plan.refit=false)
for ((r = 1; r <= reps; r++)); do
  run cohort dlrm "hetero" "${job[@]}" --exec.mode=hetero --plan.mode=manual
  run cohort dlrm "dp2 sync" "${job[@]}" --plan.mode=manual --plan.dp=2
  run torch dlrm "torch 2 threads" $py "$peers/dlrm_torch.py" --data "$data/check_train.tsv" \
    --test-data "$data/check_test.tsv" --batch 128 --steps "$steps" --warmup 20 --threads 2
done
$py - "$out" "$steps" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
samples = int(sys.argv[2]) * 128
def med(cfg, key):
    got = [r["result"][key] for r in rows if r["config"] == cfg and key in r["result"]]
    return statistics.median(got) if got else float("nan")
torch_rate = med("torch 2 threads", "samples_per_s")
print(f"\n{'config':16} {'samples/s':>10} {'train s':>8} {'test AUC':>9} {'time / torch':>13}")
for cfg in dict.fromkeys(r["config"] for r in rows):
    rate = med(cfg, "samples_per_s")
    print(f"{cfg:16} {rate:10.0f} {samples / rate:8.1f} {med(cfg, 'test_auc'):9.4f} {torch_rate / rate:13.2f}")
print(f"\nruns: {sys.argv[1]}")
PY
