#!/usr/bin/env bash
# Recovery inside a running job (--fault.recover) beyond bench/faults.sh's 2-process MLP: the GPT
# over 2 processes and the MLP and the GPT over 4, each fault-free and with one node process
# SIGKILLed after step S (the last process, or process 0 — the coordinator, whose successor
# takes over: the -p0 case), interleaved per round. Reports, per case, the recovery's time (the
# loss seen to the interrupted step's restart, as the summary's recoveries[].recover_s says),
# the detection time, the steps redone and whether every loss equals the fault-free run's.
# torchrun has no counterpart here (../shared/bench/elastic_torch.py runs 2 processes; its
# restart is measured against cohort's in bench/faults.sh).
#   bench/faults_scale.sh [ROUNDS]      (default 3)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-3}
out="$root/bench/results/faults-scale-$(date +%Y%m%d-%H%M%S).jsonl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mlp=(--data.name=synth --model.dims=784,1024,1024,10 --train.batch=256 --train.steps=200 --train.lr=0.05
     --train.momentum=0.9 --plan.refit=false --fault.recover=true)
gpt=(--train.batch=16 --train.steps=60 --plan.refit=false --fault.recover=true)
run_case() {  # run_case NAME APP PROCS KILL_STEP KILLED_PROCESS ARGS...
  local name=$1 app=$2 procs=$3 kill=$4 killed=$5; shift 5
  for kind in faultfree fault; do
    local extra=() metrics="$work/$name-$kind.jsonl"
    [ $kind = fault ] && extra=(--fault.signal=KILL --fault.signal-rank="$killed" --fault.signal-step="$kill")
    line=$("$root/build/apps/$app" "$@" --plan.dp="$procs" --launch.nproc="$procs" --metrics.file="$metrics" \
             "${extra[@]}" 2>"$work/err" | tail -n 1) || true
    [ -n "$line" ] || line='{"error": "no output"}'
    losses=$($py -c "import json,sys; print(json.dumps([json.loads(l)['loss'] for l in open(sys.argv[1]) if 'loss' in l]))" \
               "$metrics" 2>/dev/null || echo '[]')
    echo "{\"case\":\"$name\",\"kind\":\"$kind\",\"round\":$r,\"losses\":$losses,\"result\":$line}" >>"$out"
  done
}
for ((r = 1; r <= rounds; r++)); do
  run_case gpt-dp2x2 gpt 2 30 1 "${gpt[@]}"
  run_case mlp-dp4x4 mlp 4 100 3 "${mlp[@]}"
  run_case mlp-dp4x4-p0 mlp 4 100 0 "${mlp[@]}"
  run_case gpt-dp4x4 gpt 4 30 3 "${gpt[@]}"
  run_case gpt-dp4x4-p0 gpt 4 30 0 "${gpt[@]}"
done
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'case':13} {'rounds':>6} {'recover_s (median, all)':>34} {'detect_s':>9} {'redone':>7} {'losses equal':>13}")
for case in dict.fromkeys(r["case"] for r in rows):
    rec, det, redone, equal = [], [], [], []
    for n in sorted({r["round"] for r in rows if r["case"] == case}):
        ff = next(r for r in rows if r["case"] == case and r["round"] == n and r["kind"] == "faultfree")
        f = next(r for r in rows if r["case"] == case and r["round"] == n and r["kind"] == "fault")
        rs = f["result"].get("recoveries", [])
        if rs:
            rec.append(rs[0]["recover_s"]); det.append(rs[0]["detect_s"]); redone.append(rs[0]["steps_redone"])
        equal.append(bool(f["losses"]) and f["losses"] == ff["losses"])
    print(f"{case:13} {len(equal):6} {statistics.median(rec) if rec else float('nan'):10.4f} "
          f"{str([round(x, 4) for x in rec]):>23} {statistics.median(det) if det else float('nan'):9.3f} "
          f"{str(redone):>7} {str(equal):>13}")
print(f"\nruns: {sys.argv[1]}")
PY
