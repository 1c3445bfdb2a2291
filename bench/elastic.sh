#!/usr/bin/env bash
# Processes joining a running job (issue 18 items 1, 7 and 8), interleaved rounds in one run:
#   pause     mlp --data.name=synth 784-1024-1024-10, AdamW, batch 256, 2 processes (1 thread
#             each) and 2 joining after step 60 (--launch.joiners=2 --elastic.join-after=60
#             --elastic.scale-out=always), 120 steps: the join transition's `seconds` (from the
#             step boundary to the next step's start: decided, admitted, told, the data plane
#             with the newcomers connected, the state moved), its re-plan time and bytes, for the
#             user's plan dp4 (placed over 4) and the planner's plan (re-planned for 4)
#   after     the same dp4 job grown from 2 to 4 processes after step 20 against a job started
#             at 4, 220 steps: the median step time over steps 41..220 of each (goal: the grown
#             job at >= 0.95x the throughput of the one started at 4)
#   torchrun  ../shared/bench/elastic_torch.py --rounds R --ckpt-every 50 --kill-step 120 in the
#             same session: torchrun restarts every worker for a change of size as for a failure
#             (kill -> first new step, plus the steps since the checkpoint)
#   bench/elastic.sh [ROUNDS] [torch|notorch]     (default 3 torch)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-3}
with_torch=${2:-torch}
stamp=$(date +%Y%m%d-%H%M%S)
out="$root/bench/results/elastic-$stamp.jsonl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mlp=(--data.name=synth --model.dims=784,1024,1024,10 --train.batch=256 --train.optimizer=adamw --train.lr=0.001
     --train.threads=1 --plan.refit=false --fault.recover=true)
grow=(--elastic.max-procs=4 --launch.joiners=2 --elastic.scale-out=always)
record() {  # record SIDE CONFIG ROUND METRICS COMMAND...: one JSON line with the summary and the step times
  local side=$1 config=$2 round=$3 metrics=$4; shift 4
  local line
  line=$("$@" 2>"$work/err" | tail -n 1) || true
  [ -n "$line" ] || line="{\"error\": $(tail -c 400 "$work/err" | $py -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}"
  $py - "$side" "$config" "$round" "$metrics" "$line" <<'PY' | tee -a "$out"
import json, sys
side, config, rnd, metrics, line = sys.argv[1:6]
steps = []
try:
    for l in open(metrics):
        j = json.loads(l)
        if "event" not in j: steps.append(j["step_s"])
except OSError:
    pass
print(json.dumps({"side": side, "config": config, "round": int(rnd), "step_s": steps, "result": json.loads(line)}))
PY
}
for ((r = 1; r <= rounds; r++)); do
  for plan in dp4 auto; do
    degrees=(); [ $plan = dp4 ] && degrees=(--plan.dp=4)
    record join "$plan" $r "$work/m.jsonl" "$root/build/apps/mlp" "${mlp[@]}" "${degrees[@]}" "${grow[@]}" \
      --launch.nproc=2 --train.steps=120 --elastic.join-after=60 --metrics.file="$work/m.jsonl"
  done
  record grown after $r "$work/g.jsonl" "$root/build/apps/mlp" "${mlp[@]}" --plan.dp=4 "${grow[@]}" \
    --launch.nproc=2 --train.steps=220 --elastic.join-after=20 --metrics.file="$work/g.jsonl"
  record started4 after $r "$work/s.jsonl" "$root/build/apps/mlp" "${mlp[@]}" --plan.dp=4 --launch.nproc=4 \
    --train.steps=220 --metrics.file="$work/s.jsonl"
done
torch_jsonl="$root/bench/results/elastic-torch-$stamp.jsonl"
if [ "$with_torch" = torch ]; then
  $py "$peers/elastic_torch.py" --rounds "$rounds" --ckpt-every 50 --kill-step 120 --jsonl "$torch_jsonl" \
    >"$work/torch.txt" 2>&1 || echo "elastic_torch.py failed: $(tail -3 "$work/torch.txt")" >&2
  cat "$work/torch.txt"
fi
$py - "$out" "$torch_jsonl" <<'PY'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(v): return statistics.median(v) if v else float("nan")
print()
for plan in ("dp4", "auto"):
    v = [r for r in rows if r["side"] == "join" and r["config"] == plan and r["result"].get("transitions")]
    if not v: print(f"join {plan}: no transition (errors: {[r['result'].get('error', '')[:200] for r in rows if r['config'] == plan]})"); continue
    t = [r["result"]["transitions"][-1] for r in v]
    print(f"join 2 -> 4, {plan:4}: {t[0]['from']} -> {t[0]['to']}; pause {min(x['seconds'] for x in t)*1e3:.0f}-"
          f"{max(x['seconds'] for x in t)*1e3:.0f} ms (median {med([x['seconds'] for x in t])*1e3:.0f}), re-plan "
          f"{med([x['replan_s'] for x in t])*1e3:.2f} ms, {med([x['bytes_across_processes'] for x in t])/1e6:.1f} MB across "
          f"processes, {len(v)} runs")
    d = [r["result"]["scale_out"][-1] for r in v]
    print(f"   decision: predicted {med([x['predicted_step_s_before'] for x in d])*1e3:.2f} -> "
          f"{med([x['predicted_step_s_after'] for x in d])*1e3:.2f} ms per step, cost {med([x['cost_s'] for x in d])*1e3:.2f} ms")
grown = [med(r["step_s"][40:]) for r in rows if r["side"] == "grown" and len(r["step_s"]) >= 220]
started = [med(r["step_s"][40:]) for r in rows if r["side"] == "started4" and len(r["step_s"]) >= 220]
if grown and started:
    ratios = [s / g for g, s in zip(grown, started)]
    print(f"throughput after growing 2 -> 4 against a job started at 4 (steps 41..220, per round): "
          f"{', '.join(f'{x:.3f}' for x in ratios)}; median {med(ratios):.3f} "
          f"(step {med(grown)*1e3:.2f} ms grown, {med(started)*1e3:.2f} ms started at 4)")
if os.path.exists(sys.argv[2]):
    lost = []
    for l in open(sys.argv[2]):
        j = json.loads(l)
        if j.get("kind") == "fault" and j.get("lost_in_job_s") is not None: lost.append(j["lost_in_job_s"])
    if lost:
        joins = [r["result"]["transitions"][-1]["seconds"] for r in rows if r["side"] == "join" and r["result"].get("transitions")]
        print(f"torchrun, time lost per change of size (restart + steps since the checkpoint): {', '.join(f'{x:.2f}' for x in lost)} s; "
              f"cohort's join pause median {med(joins)*1e3:.0f} ms: {med(lost)/med(joins):.0f}x less")
print(f"\nruns: {sys.argv[1]}")
PY
