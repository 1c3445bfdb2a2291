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
# Prints one JSON line per run and a table: samples/s, the training time (timed steps' samples
# over samples/s), test AUC, each side's time against PyTorch's, and the whole command's wall
# time (reading the files, the tables' initialisation and the test evaluation included).
# PAIR=bench trains on the benchmark pair instead (2,000,000 / 50,000 samples, Criteo Kaggle's full
# tables: 33.8 M rows, 2.16 GB; one pass is 15,625 steps).
#   bench/dlrm_hetero.sh [REPS] [STEPS] [PAIR]   (default 2, 10000, check; results in
#   bench/results/dlrm-hetero-<date>.jsonl)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-2}
steps=${2:-10000}
pair=${3:-check}
[ "$pair" = check ] || [ "$pair" = bench ] || { echo "dlrm_hetero: PAIR is check or bench, not '$pair'" >&2; exit 2; }
out="$root/bench/results/dlrm-hetero-$(date +%Y%m%d-%H%M%S).jsonl"
cmake --build "$root/build" --target dlrm >/dev/null
criteo_check_pair
if [ "$pair" = bench ] && [ ! -f "$data/bench_train.tsv.meta.json" ]; then
  $py "$peers/criteo_synth.py" --write "$data/bench_train.tsv" --write-test "$data/bench_test.tsv" \
    --rows 2000000 --test-rows 50000 >/dev/null
fi
job=("$root/build/apps/dlrm" --data.file="$data/${pair}_train.tsv" --data.test-file="$data/${pair}_test.tsv"
  --train.batch=128 --train.steps=$((steps + 20)) --train.warmup=20 --train.threads=2 --plan.refit=false)
timed() {  # timed SIDE MODEL CONFIG COMMAND...: run, with the whole command's wall seconds added
  local side=$1 model=$2 config=$3 start line
  shift 3
  start=$EPOCHREALTIME
  line=$("$@" 2>/dev/null | tail -n 1)
  [ -n "$line" ] || line='{"error": "no output"}'
  echo "{\"side\":\"$side\",\"model\":\"$model\",\"config\":\"$config\",\"wall_s\":$($py -c "print(round($EPOCHREALTIME - $start, 2))"),\"result\":$line}" |
    tee -a "$out"
}
for ((r = 1; r <= reps; r++)); do
  timed cohort dlrm "hetero" "${job[@]}" --exec.mode=hetero --plan.mode=manual
  timed cohort dlrm "dp2 sync" "${job[@]}" --plan.mode=manual --plan.dp=2
  timed torch dlrm "torch 2 threads" $py "$peers/dlrm_torch.py" --data "$data/${pair}_train.tsv" \
    --test-data "$data/${pair}_test.tsv" --batch 128 --steps "$steps" --warmup 20 --threads 2
done
$py - "$out" "$steps" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
samples = int(sys.argv[2]) * 128
def med(cfg, key):
    got = [r["result"][key] for r in rows if r["config"] == cfg and key in r["result"]]
    return statistics.median(got) if got else float("nan")
def wall(cfg):
    got = [r["wall_s"] for r in rows if r["config"] == cfg and "wall_s" in r]
    return statistics.median(got) if got else float("nan")
torch_rate = med("torch 2 threads", "samples_per_s")
torch_wall = wall("torch 2 threads")
print(f"\n{'config':16} {'samples/s':>10} {'train s':>8} {'test AUC':>9} {'time / torch':>13} {'wall s':>7} "
      f"{'wall / torch':>12}")
for cfg in dict.fromkeys(r["config"] for r in rows):
    rate = med(cfg, "samples_per_s")
    print(f"{cfg:16} {rate:10.0f} {samples / rate:8.1f} {med(cfg, 'test_auc'):9.4f} {torch_rate / rate:13.2f} "
          f"{wall(cfg):7.1f} {wall(cfg) / torch_wall:12.2f}")
print(f"\nruns: {sys.argv[1]}")
PY
