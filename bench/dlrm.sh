#!/usr/bin/env bash
# DLRM against PyTorch on this machine, interleaved in one run (ABAB...), on the same files:
# criteo_synth.py's check pair (200,000 / 20,000 samples, tables capped at 100,000 rows, the
# Kaggle architecture: bottom 13-512-256-64-16, 26 tables of dim 16, top 367-512-256-1), plain
# SGD lr 0.1, 1 thread for both (compute and BLAS), in file order:
#   B=128:  1,500 timed steps after 20 warm-up   vs ../shared/bench/dlrm_torch.py --batch 128
#   B=2048: 200 timed steps after 20 warm-up     vs ../shared/bench/dlrm_torch.py --batch 2048
# and on the benchmark pair (2,000,000 / 50,000 samples, Criteo Kaggle's full tables: 33.8 M rows,
# 2.16 GB at f32): B=128, 3,000 timed steps after 20 warm-up ("full" below).
# cohort runs the serial trainer with sparse table updates (--plan.mode=serial). Then the
# embedding path alone on the full tables, B=2048, 1,000 timed steps: build/apps/cohort-embedding
# (the fused path with and without transparent huge pages; "cohort-entries": --fused=false, the
# gradient entries written and read) vs bench/embedding_torch.py (nn.EmbeddingBag sparse,
# torch.optim.SGD), rows looked up and updated per second. Prints one JSON line per run and a
# table of medians with the ratio cohort/PyTorch, then test AUC per side.
#   bench/dlrm.sh [REPS]     (default 3; results in bench/results/dlrm-<date>.jsonl)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
out="$root/bench/results/dlrm-$(date +%Y%m%d-%H%M%S).jsonl"
cmake --build "$root/build" --target dlrm cohort-embedding >/dev/null
criteo_check_pair
if [ ! -f "$data/bench_train.tsv.meta.json" ]; then
  $py "$peers/criteo_synth.py" --write "$data/bench_train.tsv" --write-test "$data/bench_test.tsv" \
    --rows 2000000 --test-rows 50000 >/dev/null
fi
files=(--data.file="$data/check_train.tsv" --data.test-file="$data/check_test.tsv")

for ((r = 1; r <= reps; r++)); do
  for b in 128 2048; do
    steps=$([ $b = 128 ] && echo 1500 || echo 200)
    run cohort dlrm "batch=$b" "$root/build/apps/dlrm" "${files[@]}" --train.batch=$b \
      --train.steps=$((steps + 20)) --train.warmup=20 --train.threads=1 --plan.mode=serial
    run torch dlrm "batch=$b" $py "$peers/dlrm_torch.py" --data "$data/check_train.tsv" \
      --test-data "$data/check_test.tsv" --batch $b --steps $steps --warmup 20 --threads 1
  done
  run cohort dlrm "full batch=128" "$root/build/apps/dlrm" --data.file="$data/bench_train.tsv" \
    --data.test-file="$data/bench_test.tsv" --train.batch=128 --train.steps=3020 --train.warmup=20 \
    --train.threads=1 --plan.mode=serial
  run torch dlrm "full batch=128" $py "$peers/dlrm_torch.py" --data "$data/bench_train.tsv" \
    --test-data "$data/bench_test.tsv" --batch 128 --steps 3000 --warmup 20 --threads 1
  for hp in false true; do
    run cohort embedding "hugepages=$hp" "$root/build/apps/cohort-embedding" --data.file="$data/bench_train.tsv" \
      --batch=2048 --steps=1000 --hugepages=$hp
  done
  run cohort-entries embedding "hugepages=false" "$root/build/apps/cohort-embedding" \
    --data.file="$data/bench_train.tsv" --batch=2048 --steps=1000 --fused=false
  COHORT_PEERS="$peers" run torch embedding "hugepages=false" $py "$root/bench/embedding_torch.py" \
    "$data/bench_train.tsv" --batch 2048 --steps 1000
done

table torch
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
for cfg in sorted({r["config"] for r in rows}):
    for side in ("cohort", "torch"):
        a = [r["result"].get("test_auc") for r in rows if r["config"] == cfg and r["side"] == side]
        a = [x for x in a if x is not None]
        if a: print(f"{cfg:12} {side:7} test AUC median {statistics.median(a):.4f} (runs: {', '.join(f'{x:.4f}' for x in a)})")
PY
