#!/usr/bin/env bash
# Interleaved 1F1B against plain 1F1B on this machine, measured against the cost model. For mlp
# (synth) and gpt (GPL-3) on 2 ranks: pp2 with 4 and 8 micro-batches, and their interleaved twins
# with 2 (and, for m8, 4) virtual stages. The profile is calibrated, then refit by REFIT_RUNS runs
# of the planner's own choice (as a user's first runs refit it: default 3); every plan is predicted
# from it (--plan.only) and trained in ROUNDS interleaved rounds (default 5) with the refit off.
# Prints per plan the predicted and the measured median step, the error, and the interleaved
# plan's step over its plain twin's, predicted and measured.
#   bench/interleaved.sh [STEPS]        (timed steps per run; default 30 for gpt, 10x for mlp)
#   MODELS=gpt bench/interleaved.sh     (default "mlp gpt")
set -euo pipefail
source "$(dirname "$0")/lib.sh"
steps=${1:-30}
warmup=3
stamp=$(date +%Y%m%d-%H%M%S)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$root/bench/results/interleaved-$stamp.jsonl"
: >"$out"
profile="$work/profile.json"
gpl=/usr/share/common-licenses/GPL-3
"$root/build/apps/mlp" --data.name=synth --plan.only=true --cluster.calibrate=true --cluster.profile="$profile" \
  | sed -n 1p >&2
plans=("pp2 m4:--plan.pp=2 --plan.micro-batches=4"
       "pp2 v2 m4:--plan.pp=2 --plan.virtual-stages=2 --plan.micro-batches=4"
       "pp2 m8:--plan.pp=2 --plan.micro-batches=8"
       "pp2 v2 m8:--plan.pp=2 --plan.virtual-stages=2 --plan.micro-batches=8"
       "pp2 v4 m8:--plan.pp=2 --plan.virtual-stages=4 --plan.micro-batches=8")
for model in ${MODELS:-mlp gpt}; do
  case $model in
    mlp) base="--data.name=synth --train.batch=128 --train.threads=2"; n=$((steps * 10)) ;;
    gpt) base="--data.file=$gpl --train.batch=16 --train.threads=2"; n=$steps ;;
  esac
  bin="$root/build/apps/$model"
  cp "$profile" "$work/$model.json"
  for ((r = 1; r <= ${REFIT_RUNS:-3}; r++)); do
    $bin $base --plan.ranks=2 --cluster.profile="$work/$model.json" --train.steps=$((n + warmup)) \
      --train.warmup=$warmup >/dev/null 2>&1
  done
  for entry in "${plans[@]}"; do
    name=${entry%%:*}
    pred=$($bin $base ${entry#*:} --cluster.profile="$work/$model.json" --plan.only=true 2>/dev/null | tail -n 1)
    echo "{\"model\":\"$model\",\"plan\":\"$name\",\"predicted\":$pred}" >>"$out"
  done
  for ((round = 1; round <= ${ROUNDS:-5}; round++)); do
    for entry in "${plans[@]}"; do
      name=${entry%%:*}
      line=$($bin $base ${entry#*:} --cluster.profile="$work/$model.json" --plan.refit=false \
               --train.steps=$((n + warmup)) --train.warmup=$warmup 2>/dev/null | tail -n 1)
      [ -n "$line" ] || line='{}'
      echo "{\"model\":\"$model\",\"plan\":\"$name\",\"round\":$round,\"result\":$line}" >>"$out"
    done
  done
done
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
pred = {(r["model"], r["plan"]): r["predicted"]["plan"]["predicted"]["step_s"] for r in rows if "predicted" in r}
meas = {}
for r in rows:
    if "result" in r and r["result"].get("prediction", {}).get("measured_step_s"):
        meas.setdefault((r["model"], r["plan"]), []).append(r["result"]["prediction"]["measured_step_s"])
print(f"{'model':5} {'plan':10} {'predicted ms':>12} {'measured ms':>11} {'error':>7} {'vs plain: pred':>15} {'meas':>6}")
errors = []
for (model, plan), p in pred.items():
    if (model, plan) not in meas: continue
    m = statistics.median(meas[(model, plan)])
    err = (p - m) / m
    errors.append(abs(err))
    twin = plan.replace(" v2", "").replace(" v4", "")
    ratio = ""
    if twin != plan and (model, twin) in meas:
        ratio = f"{p / pred[(model, twin)]:15.3f} {m / statistics.median(meas[(model, twin)]):6.3f}"
    print(f"{model:5} {plan:10} {p * 1e3:12.3f} {m * 1e3:11.3f} {100 * err:6.1f}% {ratio}")
if errors:
    print(f"mean absolute error {100 * statistics.mean(errors):.1f} % over {len(errors)} plans")
print(f"runs: {sys.argv[1]}")
PY
