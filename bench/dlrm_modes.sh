#!/usr/bin/env bash
# DLRM's execution modes against sync on two data-parallel replicas (one thread each: the machine's 2
# cores), on criteo_synth.py's check pair (tables capped at 100,000 rows, Zipf-distributed ids;
# the Kaggle architecture), B=128, plain SGD lr 0.1, 1,500 timed steps after 20 warm-up (about
# one pass over the 200,000 training rows), REPS interleaved rounds of the same seed:
#   dp2 sync      every step gathers both replicas' touched rows (the serial program's losses)
#   dp2 async S=1 a step's table updates apply 1 step late (every lookup reads tables 1 step old)
#   dp2 async S=4 the same, 4 steps late
#   dp2 geo K=10  each replica trains its own tables; the touched rows' deltas every 10 steps
#   dp2 geo K=100 the same every 100 steps
#   geo K=.. bf16 the same with the deltas sent as bf16 (--exec.geo-deltas=bf16)
# Prints one JSON line per run and a table: samples/s, test AUC (median and the spread over
# the rounds), sparse bytes sent by the process, and each against sync.
#   bench/dlrm_modes.sh [REPS]   (default 3; results in bench/results/dlrm-modes-<date>.jsonl)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
out="$root/bench/results/dlrm-modes-$(date +%Y%m%d-%H%M%S).jsonl"
cmake --build "$root/build" --target dlrm >/dev/null
criteo_check_pair
job=("$root/build/apps/dlrm" --data.file="$data/check_train.tsv" --data.test-file="$data/check_test.tsv"
  --train.batch=128 --train.steps=1520 --train.warmup=20 --train.threads=2 --plan.mode=manual --plan.dp=2)
for ((r = 1; r <= reps; r++)); do
  run cohort dlrm "dp2 sync" "${job[@]}" --exec.mode=sync
  run cohort dlrm "dp2 async S=1" "${job[@]}" --exec.mode=async --exec.staleness=1
  run cohort dlrm "dp2 async S=4" "${job[@]}" --exec.mode=async --exec.staleness=4
  run cohort dlrm "dp2 geo K=10" "${job[@]}" --exec.mode=geo --exec.geo-steps=10
  run cohort dlrm "dp2 geo K=100" "${job[@]}" --exec.mode=geo --exec.geo-steps=100
  run cohort dlrm "geo K=10 bf16" "${job[@]}" --exec.mode=geo --exec.geo-steps=10 --exec.geo-deltas=bf16
  run cohort dlrm "geo K=100 bf16" "${job[@]}" --exec.mode=geo --exec.geo-steps=100 --exec.geo-deltas=bf16
done
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(cfg, key):
    got = [r["result"][key] for r in rows if r["config"] == cfg and key in r["result"]]
    return statistics.median(got) if got else float("nan"), got
sync_rate, _ = med("dp2 sync", "samples_per_s")
sync_auc, _ = med("dp2 sync", "test_auc")
sync_bytes, _ = med("dp2 sync", "sparse_bytes_sent")
print(f"\n{'config':14} {'samples/s':>10} {'vs sync':>8} {'test AUC':>9} {'AUC spread':>10} {'AUC/sync':>9} "
      f"{'sparse MB':>10} {'sync/this':>9}")
for cfg in dict.fromkeys(r["config"] for r in rows):
    rate, _ = med(cfg, "samples_per_s")
    auc, aucs = med(cfg, "test_auc")
    b, _ = med(cfg, "sparse_bytes_sent")
    spread = max(aucs) - min(aucs) if aucs else float("nan")
    print(f"{cfg:14} {rate:10.0f} {rate / sync_rate:8.2f} {auc:9.4f} {spread:10.4f} {auc / sync_auc:9.4f} "
          f"{b / 1e6:10.1f} {sync_bytes / b:9.1f}")
print(f"\nruns: {sys.argv[1]}")
PY
