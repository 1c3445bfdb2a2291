#!/usr/bin/env bash
# Scores today's cost model against step times measured earlier by bench/planner_accuracy.sh:
# one accuracy run ranks the plans against its own measurements, whose round-to-round noise on
# this shared 2-core machine is large (two rounds of gpt's 33 plans on 4 ranks correlate at
# 0.47-0.64); scoring one model against several runs' medians shows what is the model's and
# what is one run's noise. The model is built as the accuracy run builds it: a fresh
# calibration, then REFIT_RUNS (default 3) refit runs of the auto plan per model and rank count; no plan is
# trained again. The runtime's speed must not have changed since the runs (it is what they
# measured). MAPE is given twice: as is, and with the predictions rescaled to the run's mean
# (the machine's speed drifts between runs: that part is calibration, not ranking).
#   bench/planner_rescore.sh bench/results/planner-accuracy-*.jsonl
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ $# -ge 1 ] || { echo "usage: bench/planner_rescore.sh RESULTS.jsonl..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gpl=/usr/share/common-licenses/GPL-3
threads=2
args_for() {  # as bench/planner_accuracy.sh
  case $1 in
    mlp) echo "--data.name=synth --train.batch=128 --train.threads=$threads" ;;
    gpt) echo "--data.file=$gpl --train.batch=16 --train.threads=$threads" ;;
  esac
}
"$root/build/apps/mlp" --data.name=synth --plan.only=true --cluster.calibrate=true --cluster.profile="$work/profile.json" \
  | head -n 1 >&2
for model in ${MODELS:-mlp gpt}; do
  for ranks in ${RANKS:-2 4}; do
    base="$(args_for $model) --plan.ranks=$ranks --plan.max-micro-batches=8"
    n=15; [ $model = mlp ] && n=123
    cp "$work/profile.json" "$work/after.json"
    for ((refit_run = 1; refit_run <= ${REFIT_RUNS:-3}; refit_run++)); do
      "$root/build/apps/$model" $base --cluster.profile="$work/after.json" --train.steps=$n --train.warmup=3 >/dev/null 2>&1
    done
    "$root/build/apps/$model" $base --cluster.profile="$work/after.json" --plan.only=true \
      --plan.list="$work/$model-$ranks.jsonl" >/dev/null
  done
done
PYTHONPATH="$root/bench" $py - "$work" "$@" <<'PY'
import json, os, statistics, sys
work, files = sys.argv[1], sys.argv[2:]
def key(p): return json.dumps([p["dp"], p["tp"], p["pp"], p["micro_batches"], p["schedule"], p["shard_params"], p.get("virtual_stages", 1)])
from rank_stats import spearman
print(f"{'model':5} {'ranks':>5} {'run':>28} {'plans':>5} {'MAPE':>6} {'rescaled':>8} {'rho':>5} {'auto/best':>9}")
for model in ("mlp", "gpt"):
    for ranks in (2, 4):
        listing = os.path.join(work, f"{model}-{ranks}.jsonl")
        if not os.path.exists(listing): continue
        pred = {key(p): p["predicted"]["step_s"] for p in map(json.loads, open(listing)) if p["predicted"]["fits"]}
        for f in files:
            runs = {}
            for l in open(f):
                r = json.loads(l)
                if r["model"] == model and r["ranks"] == ranks and "prediction" in r["result"]:
                    runs.setdefault(key(r["plan"]), []).append(r["result"]["prediction"]["measured_step_s"])
            ks = [k for k in runs if k in pred]
            if len(ks) < 3: continue
            m = [statistics.median(runs[k]) for k in ks]
            x = [pred[k] for k in ks]
            scale = statistics.mean(m) / statistics.mean(x)
            mape = 100 * statistics.mean(abs(a - b) / b for a, b in zip(x, m))
            rescaled = 100 * statistics.mean(abs(a * scale - b) / b for a, b in zip(x, m))
            auto = m[min(range(len(x)), key=lambda i: x[i])]
            print(f"{model:5} {ranks:5} {os.path.basename(f)[:-6]:>28} {len(ks):5} {mape:5.1f}% {rescaled:7.1f}% "
                  f"{spearman(x, m):5.2f} {auto / min(m):9.2f}")
PY
