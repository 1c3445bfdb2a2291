#!/usr/bin/env bash
# The planner's table sharding against the four kinds a user could name (issue 19 item 4): on
# two ranks (one thread each: the machine's 2 cores), the Kaggle architecture on criteo_synth.py's
# check pair, B=128, plain SGD lr 0.1, STEPS timed steps after 20 warm-up, REPS interleaved
# rounds, on two table sets: the check pair's (capped at 100,000 rows, 54 MB) and Criteo
# Kaggle's full sizes (33.8 M rows, 2.16 GB; the ids hash into them):
#   tp2 replicated|column|row|table   --plan.tp=2 --model.table-sharding=KIND (every table so)
#   tp2 auto                          the planner's choice per table for tp2
#   joint                             --plan.mode=auto --plan.ranks=2: the degree and the tables
#                                     chosen together (apps/driver/joint_plan.hpp)
# The planner reads a profile measured here first (--cluster.calibrate: the lookup and update
# rates included) and kept in the results folder, never refit by these runs.
# Prints one JSON line per run, then per table set a table: samples/s (median, spread), the
# ratio to the fastest of the four kinds, and what auto and joint chose.
#   bench/dlrm_tables.sh [REPS] [STEPS]   (defaults 3, 500; results in bench/results/dlrm-tables-<date>.jsonl)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
steps=${2:-500}
stamp=$(date +%Y%m%d-%H%M%S)
out="$root/bench/results/dlrm-tables-$stamp.jsonl"
profile="$root/bench/results/dlrm-tables-$stamp-profile.json"
cmake --build "$root/build" --target dlrm >/dev/null
criteo_check_pair
job=("$root/build/apps/dlrm" --data.file="$data/check_train.tsv" --data.test-file="$data/check_test.tsv"
  --train.batch=128 --train.steps=$((steps + 20)) --train.warmup=20 --train.threads=2
  --cluster.profile="$profile" --plan.refit=false)
"${job[@]}" --plan.only=true --cluster.calibrate=true >/dev/null 2>&1
for ((r = 1; r <= reps; r++)); do
  for tables in check kaggle; do
    rows=()
    [ "$tables" = kaggle ] && rows=(--model.rows=0)
    for kind in replicated column row table auto; do
      run cohort "$tables" "tp2 $kind" "${job[@]}" "${rows[@]}" --plan.tp=2 --model.table-sharding="$kind"
    done
    run cohort "$tables" "joint" "${job[@]}" "${rows[@]}" --plan.mode=auto --plan.ranks=2
  done
done
$py - "$out" <<'PY'
import json, statistics, sys
from collections import Counter
rows = [json.loads(l) for l in open(sys.argv[1])]
def chose(res):
    plan = res.get("plan", {})
    degrees = f"dp{plan.get('dp')} tp{plan.get('tp')} pp{plan.get('pp')}"
    kinds = Counter(v.split("@")[0] for v in res.get("tables", {}).values())
    if not kinds:  # one kind named for every table, or one tensor-parallel rank
        kind = res.get("table_sharding", "auto")
        kinds = Counter({"replicated" if kind == "auto" or plan.get("tp") == 1 else kind: 26})
    return degrees + ": " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
for tables in dict.fromkeys(r["model"] for r in rows):
    got = {}
    for r in rows:
        if r["model"] == tables and "samples_per_s" in r["result"]:
            got.setdefault(r["config"], []).append(r["result"])
    med = {c: statistics.median(x["samples_per_s"] for x in v) for c, v in got.items()}
    fixed = {c: m for c, m in med.items() if c.startswith("tp2 ") and c != "tp2 auto"}
    best = max(fixed.values()) if fixed else float("nan")
    print(f"\n{tables} tables: samples/s, the ratio to the fastest fixed kind ({max(fixed, key=fixed.get) if fixed else '-'})")
    print(f"{'config':16} {'median':>9} {'min':>9} {'max':>9} {'ratio':>6}  chose")
    for c, v in got.items():
        rates = [x["samples_per_s"] for x in v]
        print(f"{c:16} {med[c]:9.0f} {min(rates):9.0f} {max(rates):9.0f} {med[c] / best:6.3f}  {chose(v[-1])}")
print(f"\nruns: {sys.argv[1]}")
PY
