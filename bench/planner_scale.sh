#!/usr/bin/env bash
# The planner at scale, simulated: GPT-3 175B and a 260B-parameter transformer planned for
# 64 to 4,096 H100s (configs/scale/h100_N.json: 8 per machine, NVLink inside, 400 Gb/s
# InfiniBand between), one core, mixed precision, activation recomputation allowed. Weak
# scaling: the global batch grows with the devices (one 2,048-token sequence per device).
# Reports planning time (and the re-plan from the cached model analysis, what the planner
# actor does when a running job's devices change), the chosen layout, predicted step time, model-FLOPs utilisation and
# weak-scaling efficiency against 64 devices. Nothing here runs on a GPU: these are the
# cost model's and the simulator's predictions, on the H100 device profile
# (configs/devices/h100-sxm5-80gb.json), with the validation set's error (bench/published.sh)
# printed beside them.
#   bench/planner_scale.sh [SIZES...]     (default 64 128 256 512 1024 2048 4096)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" --target gpt >/dev/null
mkdir -p "$root/bench/results"
out="$root/bench/results/planner-scale-$(date +%Y%m%d-%H%M%S).jsonl"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(64 128 256 512 1024 2048 4096)
declare -A shape=(
  [gpt3-175b]="--model.layers=96 --model.d=12288 --model.heads=96"
  [t-260b]="--model.layers=80 --model.d=16384 --model.heads=128"
)
for model in gpt3-175b t-260b; do
  for n in "${sizes[@]}"; do
    all=$(taskset -c 0 "$root/build/apps/gpt" ${shape[$model]} --model.seq=2048 --model.vocab=50257 \
             --train.batch="$n" --plan.half-precision=true --plan.recompute=true --plan.only=true \
             --cluster.file="$root/configs/scale/h100_$n.json" 2>&1 || true)
    line=$(echo "$all" | grep -v '^$' | tail -n 1)
    # a plan that does not fit ends with the planner's advice, not JSON: keep it as text
    echo "$line" | /usr/bin/python3 -c 'import json,sys; json.loads(sys.stdin.read())' 2>/dev/null \
      || line=$(/usr/bin/python3 -c 'import json,sys; print(json.dumps({"error": sys.argv[1]}))' "$(echo "$all" | head -n 2 | tr '\n' ' ')")
    echo "{\"model\":\"$model\",\"devices\":$n,\"result\":$line}" | tee -a "$out" >/dev/null
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'model':10} {'GPUs':>5} {'batch':>5} {'plan (s)':>8} {'replan':>6}  {'layout':34} {'step (s)':>8} {'mem GB':>6} {'MFU':>5} {'weak':>6}")
base = {}
for r in rows:
    res = r["result"]
    if "plan" not in res:
        print(f"{r['model']:10} {r['devices']:5}  {res.get('error', res)}")
        continue
    p = res["plan"]; pr = p["predicted"]
    layout = f"dp{p['dp']} tp{p['tp']} pp{p['pp']} m{p['micro_batches']} {p['schedule']}" + \
             (" sharded" if p["shard_params"] else "") + (" recompute" if p.get("recompute") else "")
    per_device = r["devices"] / pr["step_s"] / r["devices"]  # sequences per second per device (batch = devices)
    base.setdefault(r["model"], per_device)
    print(f"{r['model']:10} {r['devices']:5} {r['devices']:5} {p['planning_s']:8.2f} {p.get('replan_s', float('nan')):6.2f}  {layout:34} {pr['step_s']:8.2f} "
          f"{pr['peak_memory_bytes'] / 1e9:6.1f} {100 * pr['mfu']:4.1f}% {100 * per_device / base[r['model']]:5.1f}%")
params = {r["model"]: r["result"]["plan"]["parameters"] for r in rows if "plan" in r["result"]}
print("parameters: " + ", ".join(f"{m} {v / 1e9:.1f}B" for m, v in params.items()) +
      "; weak scaling: sequences/s per device against the smallest cluster that fits")
# the cost model's measured error: the newest bench/published.sh run, beside these predictions
import glob, os
runs = sorted(glob.glob(os.path.join(os.path.dirname(sys.argv[1]), "published-*.jsonl")))
said = False
for prefix, what in (("megatron-2021", "Megatron-LM 2021, A100"), ("mcore-h100", "Megatron-Core 2024, H100")):
    # the newest run that has these rows (a run of some rows only leaves the others to older ones)
    for path in reversed(runs):
        rows = [json.loads(l) for l in open(path)]
        errors = [abs(r["layout_error"]) for r in rows if r["id"].startswith(prefix) and "layout_error" in r]
        if errors:
            print(f"simulated; the cost model against {what} runs: mean absolute error {100 * sum(errors) / len(errors):.1f} % "
                  f"over {len(errors)}, largest {100 * max(errors):.1f} % ({os.path.basename(path)})")
            said = True
            break
if not said:
    print("simulated; no bench/published.sh result yet to say how far off the cost model is")
PY
echo "raw: $out"
