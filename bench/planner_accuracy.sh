#!/usr/bin/env bash
# How right is the planner? For mlp (synth) and gpt (GPL-3), on 2 and on 4 ranks of this
# machine: every candidate plan the planner lists (up to 8 micro-batches) is trained for a
# few steps and its median step time compared with the prediction. Twice: predictions from
# the freshly calibrated profile ("before"), and from the profile after online refits
# ("after": the auto-chosen plan trained REFIT_RUNS times, default 3, with --plan.refit, as a
# user's first runs do; the profile keeps the mean of their fits). Reports mean absolute % error, Spearman rank correlation, and how the auto-chosen
# plan measured against the best measured one, and how alike two rounds of the same plans
# rank them (the noise ceiling for the rank correlation). Then the same across processes: every
# candidate for a job of 2 and of 4 processes (one thread each, --plan.processes) trained with
# --launch.nproc, against predictions made with the profile's measured link between processes
# ("before") and after REFIT_RUNS runs of the chosen plan have refit the compute and the link's
# slowdown for that many processes ("after").
#   bench/planner_accuracy.sh [STEPS]      (default 12 timed steps per gpt plan, 10x that for mlp)
#   PROCS="2" bench/planner_accuracy.sh    (process counts; default "2 4"; PROCS= skips them)
#   MODELS=mlp bench/planner_accuracy.sh   (only some models; default "mlp gpt")
#   RANKS=4 bench/planner_accuracy.sh      (only some rank counts; default "2 4"; RANKS= skips them)
#   REFIT_RUNS=1 bench/planner_accuracy.sh (runs refitting the "after" profile; default 3)
#   MLP_ROUNDS=5 GPT_ROUNDS=3 bench/planner_accuracy.sh (rounds over each model's plans, median
#                                          per plan; default 5 for mlp, 3 for gpt: one disturbed
#                                          round cannot move a median)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
steps=${1:-12}
warmup=3
stamp=$(date +%Y%m%d-%H%M%S)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
profile="$work/profile.json"
out="$root/bench/results/planner-accuracy-$stamp.jsonl"
: >"$out"
: >"$out.predictions"
gpl=/usr/share/common-licenses/GPL-3
threads=2

args_for() {  # the model's options
  case $1 in
    mlp) echo "--data.name=synth --train.batch=128 --train.threads=$threads" ;;  # ~10 ms steps: 10x the steps
    gpt) echo "--data.file=$gpl --train.batch=16 --train.threads=$threads" ;;
  esac
}
binary_for() { echo "$root/build/apps/$1"; }

# a fresh measured profile for the whole run
"$root/build/apps/mlp" --data.name=synth --plan.only=true --cluster.calibrate=true --cluster.profile="$profile" \
  | sed -n 1p >&2

for model in ${MODELS:-mlp gpt}; do
  for ranks in ${RANKS-2 4}; do
    base="$(args_for $model) --plan.ranks=$ranks --plan.max-micro-batches=8 --cluster.profile=$profile"
    bin=$(binary_for $model)
    n=$steps; [ $model = mlp ] && n=$((steps * 10))
    cp "$profile" "$work/before.json"
    # predictions before refit, and the plan auto chooses
    $bin $base --cluster.profile="$work/before.json" --plan.only=true --plan.list="$work/before.jsonl" >/dev/null
    # runs of the auto plan with refit: the "after" profile
    cp "$profile" "$work/after.json"
    for ((refit_run = 1; refit_run <= ${REFIT_RUNS:-3}; refit_run++)); do
      $bin $base --cluster.profile="$work/after.json" --train.steps=$((n + warmup)) --train.warmup=$warmup \
        >/dev/null 2>&1
    done
    $bin $base --cluster.profile="$work/after.json" --plan.only=true --plan.list="$work/after.jsonl" >/dev/null
    # measure every fitting candidate (refit off: the profile stays as it is), in rounds that
    # each run every plan once, so that the machine's drift over minutes falls on all plans
    # alike; a plan's figure is its median over the rounds
    rounds=${GPT_ROUNDS:-3}; [ $model = mlp ] && rounds=${MLP_ROUNDS:-5}
    grep '"fits":true' "$work/before.jsonl" >"$work/fitting.jsonl"
    for ((round = 1; round <= rounds; round++)); do
      i=0
      while IFS= read -r plan; do
        i=$((i + 1))
        echo "$plan" >"$work/plan-$i.json"
        line=$($bin $base --cluster.profile="$work/before.json" --plan.refit=false --plan.file="$work/plan-$i.json" \
                 --train.steps=$((n + warmup)) --train.warmup=$warmup 2>/dev/null | tail -n 1)
        echo "{\"model\":\"$model\",\"ranks\":$ranks,\"index\":$i,\"round\":$round,\"plan\":$plan,\"result\":$line}" >>"$out"
      done <"$work/fitting.jsonl"
    done
    $py - "$model" "$ranks" "$work/before.jsonl" "$work/after.jsonl" >>"$out.predictions" <<'PY'
import json, sys
model, ranks, before, after = sys.argv[1:5]
def key(p): return (p["dp"], p["tp"], p["pp"], p["micro_batches"], p["schedule"], p["shard_params"], p.get("virtual_stages", 1))
b = [json.loads(l) for l in open(before)]
a = {key(p): p for p in map(json.loads, open(after))}
for p in b:
    q = a.get(key(p))
    print(json.dumps({"model": model, "ranks": int(ranks), "key": list(key(p)), "before": p["predicted"]["step_s"],
                      "after": q["predicted"]["step_s"] if q else None, "auto_before": p is b[0],
                      "auto_after": q is not None and key(q) == key(next(iter(a.values())))}))
PY
  done
done

# across processes: one thread per process, one rank each, the plans for that job; "before"
# from the fresh profile (its measured link between processes), "after" from the profile that
# REFIT_RUNS runs of the chosen plan refit (the compute, and the link's slowdown for that many processes)
for model in ${MODELS:-mlp gpt}; do
  for procs in ${PROCS-2 4}; do
    base="$(args_for $model | sed 's/--train.threads=[0-9]*/--train.threads=1/') --plan.max-micro-batches=8"
    bin=$(binary_for $model)
    n=$steps; [ $model = mlp ] && n=$((steps * 10))
    cp "$profile" "$work/pbefore.json"
    cp "$profile" "$work/pafter.json"
    $bin $base --cluster.profile="$work/pbefore.json" --plan.processes=$procs --plan.only=true \
      --plan.list="$work/procs.jsonl" >/dev/null
    for ((refit_run = 1; refit_run <= ${REFIT_RUNS:-3}; refit_run++)); do
      $bin $base --cluster.profile="$work/pafter.json" --launch.nproc=$procs --train.steps=$((n + warmup)) \
        --train.warmup=$warmup >/dev/null 2>&1
    done
    # the refit profile's line (its link between processes: "x3.1 for 2 processes")
    $bin $base --cluster.profile="$work/pafter.json" --plan.processes=$procs --plan.only=true \
      --plan.list="$work/procs-after.jsonl" | sed -n 1p | sed "s/^/after $procs processes: /" >&2
    $py - "$work/procs.jsonl" "$work/procs-after.jsonl" "$model" "$procs" >>"$out" <<'PY'
import json, sys
def key(p): return json.dumps([p["dp"], p["tp"], p["pp"], p["micro_batches"], p["schedule"], p["shard_params"], p.get("virtual_stages", 1)])
after = {key(p): p["predicted"]["step_s"] for p in map(json.loads, open(sys.argv[2]))}
first = json.loads(next(open(sys.argv[2])))
for p in map(json.loads, open(sys.argv[1])):
    print(json.dumps({"model": sys.argv[3], "processes": int(sys.argv[4]), "prediction_of": key(p),
                      "before": p["predicted"]["step_s"], "after": after.get(key(p)), "auto_after": key(p) == key(first)}))
PY
    grep '"fits":true' "$work/procs.jsonl" >"$work/fitting.jsonl"
    rounds=${GPT_ROUNDS:-3}; [ $model = mlp ] && rounds=${MLP_ROUNDS:-5}
    for ((round = 1; round <= rounds; round++)); do
      i=0
      while IFS= read -r plan; do
        i=$((i + 1))
        echo "$plan" >"$work/plan-$i.json"
        line=$($bin $base --cluster.profile="$work/pbefore.json" --launch.nproc=$procs --plan.refit=false \
                 --plan.file="$work/plan-$i.json" --train.steps=$((n + warmup)) --train.warmup=$warmup 2>/dev/null |
               tail -n 1)
        [ -n "$line" ] || line='{}'
        echo "{\"model\":\"$model\",\"processes\":$procs,\"index\":$i,\"round\":$round,\"plan\":$plan,\"result\":$line}" >>"$out"
      done <"$work/fitting.jsonl"
    done
  done
done

PYTHONPATH="$root/bench" $py - "$out" "$out.predictions" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
preds = [json.loads(l) for l in open(sys.argv[2])]
def key(p): return [p["dp"], p["tp"], p["pp"], p["micro_batches"], p["schedule"], p["shard_params"], p.get("virtual_stages", 1)]
from rank_stats import spearman
print(f"{'model':5} {'ranks':>5} {'plans':>5} {'MAPE before':>11} {'MAPE after':>10} {'rho before':>10} {'rho after':>9} "
      f"{'auto/best before':>16} {'auto/best after':>15}")
for model in ("mlp", "gpt"):
    for ranks in (2, 4):
        sel = [r for r in rows if r["model"] == model and r.get("ranks") == ranks and "prediction" in r["result"]]
        if not sel: continue
        runs = {}
        for r in sel: runs.setdefault(json.dumps(key(r["plan"])), []).append(r["result"]["prediction"]["measured_step_s"])
        measured = {k: statistics.median(v) for k, v in runs.items()}
        p = [q for q in preds if q["model"] == model and q["ranks"] == ranks and json.dumps(q["key"]) in measured]
        m = [measured[json.dumps(q["key"])] for q in p]
        before = [q["before"] for q in p]
        after = [q["after"] for q in p]
        mape = lambda xs: 100 * statistics.mean(abs(x - y) / y for x, y in zip(xs, m))
        best = min(m)
        auto_b = next((measured[json.dumps(q["key"])] for q in p if q["auto_before"]), float("nan"))
        # the plan the planner chose after refit (its first line: near ties broken, not simply
        # the lowest prediction)
        auto_a = next((measured[json.dumps(q["key"])] for q in p if q["auto_after"]), float("nan"))
        print(f"{model:5} {ranks:5} {len(p):5} {mape(before):10.1f}% {mape(after):9.1f}% {spearman(before, m):10.2f} "
              f"{spearman(after, m):9.2f} {auto_b / best:16.2f} {auto_a / best:15.2f}")
        # the noise floor: plans that do identical work (GPipe and 1F1B predicted equal)
        pairs = {}
        for q, x in zip(p, m):
            k = q["key"]
            if k[2] > 1: pairs.setdefault(json.dumps(k[:4] + k[5:]), []).append(x)
        diffs = sorted(abs(v[0] - v[1]) / min(v) for v in pairs.values() if len(v) == 2)
        # the noise ceiling: how alike two rounds of the same plans rank them (no model can
        # rank the medians much better than repeated measurement agrees with itself)
        by_round = {}
        for r in sel: by_round.setdefault(r["round"], {})[json.dumps(key(r["plan"]))] = r["result"]["prediction"]["measured_step_s"]
        rounds = sorted(by_round)
        repeat = []
        for i in range(len(rounds)):
            for j in range(i + 1, len(rounds)):
                ks = sorted(set(by_round[rounds[i]]) & set(by_round[rounds[j]]))
                if len(ks) > 2: repeat.append(spearman([by_round[rounds[i]][k] for k in ks], [by_round[rounds[j]][k] for k in ks]))
        if repeat:
            print(f"      repeat: two rounds of the same plans rank them with rho {statistics.mean(repeat):.2f} "
                  f"(mean of {len(repeat)} pairs, {min(repeat):.2f} .. {max(repeat):.2f})")
        if diffs:
            print(f"      noise: {len(diffs)} GPipe/1F1B pairs of identical predicted work differ by median "
                  f"{100 * diffs[len(diffs) // 2]:.1f}%, at most {100 * diffs[-1]:.1f}%")
        for q, x in sorted(zip(p, m), key=lambda t: t[1])[:3]:
            print(f"      best measured: {q['key']}  {x * 1e3:.2f} ms (predicted {q['before'] * 1e3:.2f} -> {q['after'] * 1e3:.2f})")
PY
PYTHONPATH="$root/bench" $py - "$out" <<'PY'
import json, statistics, sys
from rank_stats import spearman
rows = [json.loads(l) for l in open(sys.argv[1])]
def key(p): return json.dumps([p["dp"], p["tp"], p["pp"], p["micro_batches"], p["schedule"], p["shard_params"], p.get("virtual_stages", 1)])
procs = sorted({(r["model"], r["processes"]) for r in rows if "processes" in r})
if procs:
    print(f"\nacross processes (one thread each; predictions before and after the refit of the compute and the link's slowdown):")
    print(f"{'model':5} {'procs':>5} {'plans':>5} {'MAPE before':>11} {'MAPE after':>10} {'rho before':>10} "
          f"{'rho after':>9} {'auto/best before':>16} {'auto/best after':>15}")
for model, n in procs:
    sel = [r for r in rows if r.get("processes") == n and r["model"] == model and "result" in r
           and "prediction" in r["result"]]
    preds = {r["prediction_of"]: r for r in rows if r.get("processes") == n and r["model"] == model and "prediction_of" in r}
    if not sel: continue
    runs, first = {}, None
    for r in sel:
        k = key(r["plan"])
        runs.setdefault(k, []).append(r["result"]["prediction"]["measured_step_s"])
        if r["index"] == 1: first = k  # the planner's choice: the first line of its list
    ks = sorted(k for k in runs if k in preds and preds[k]["after"] is not None)
    m = [statistics.median(runs[k]) for k in ks]
    before = [preds[k]["before"] for k in ks]
    after = [preds[k]["after"] for k in ks]
    mape = lambda xs: 100 * statistics.mean(abs(x - y) / y for x, y in zip(xs, m))
    best = min(m)
    auto_b = statistics.median(runs[first]) / best if first else float("nan")
    chosen_after = next((k for k in ks if preds[k]["auto_after"]), None)
    auto_a = statistics.median(runs[chosen_after]) / best if chosen_after else float("nan")
    print(f"{model:5} {n:5} {len(ks):5} {mape(before):10.1f}% {mape(after):9.1f}% {spearman(before, m):10.2f} "
          f"{spearman(after, m):9.2f} {auto_b:16.2f} {auto_a:15.2f}")
    for k, x in sorted(zip(ks, m), key=lambda t: t[1])[:3]:
        print(f"      best measured: {k}  {x * 1e3:.2f} ms (predicted {preds[k]['before'] * 1e3:.2f} -> "
              f"{preds[k]['after'] * 1e3:.2f})")
PY
echo "raw: $out (predictions: $out.predictions)"
