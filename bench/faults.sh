#!/usr/bin/env bash
# Failures and checkpoints against torchrun's elastic restart, interleaved in one run:
#   cohort  mlp --data.name=synth 784-1024-1024-10, SGD lr 0.05 momentum 0.9, dp2 over 2 processes
#           (--launch.nproc=2, 1 thread each, global batch 256), 300 steps, a checkpoint every C
#           steps; the faulted job SIGKILLs process 1 after step 119 and --launch.max-restarts=3
#           restarts the job from the newest checkpoint (the 2-process fallback: with no majority
#           left, the launcher restarts, as torchrun does)
#   torch   ../shared/bench/elastic_torch.py: the same model, DDP over gloo under torchrun
#           (--max_restarts=3), rank 1 SIGKILLed at step 120, a checkpoint every C steps
#   cohort --fault.recover  the same job, no checkpoints: process 0 takes over process 1's rank
#           (restored from its data-parallel replica) and redoes only the interrupted step; nobody
#           restarts (a step then commits once its job-wide loss is known: measured fault-free too)
# Per round: cohort without checkpoints, with them, with them and the kill; cohort recovering
# in the job, fault-free and with the kill; then torch's fault-free and faulted job. Reports the time lost to the failure (faulted wall time minus
# the fault-free one) for both and their ratio, steps redone, whether the final loss equals the
# fault-free run's, and cohort's checkpoint cost (with against without, per checkpoint and at
# one checkpoint a minute).
#   bench/faults.sh [ROUNDS] [C]      (default 3 rounds, a checkpoint every 50 steps)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-3}
every=${2:-50}
out="$root/bench/results/faults-$(date +%Y%m%d-%H%M%S).jsonl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
job=(--data.name=synth --model.dims=784,1024,1024,10 --train.batch=256 --train.steps=300 --train.warmup=10
     --train.lr=0.05 --train.momentum=0.9 --plan.dp=2 --launch.nproc=2 --plan.refit=false)
timed() {  # timed SIDE KIND COMMAND...: one JSON line with the wall time and the summary
  local side=$1 kind=$2; shift 2
  local t0 t1 line
  t0=$(date +%s.%N)
  line=$("$@" 2>"$work/err" | tail -n 1) || true
  t1=$(date +%s.%N)
  [ -n "$line" ] || line='{"error": "no output"}'
  echo "{\"side\":\"$side\",\"kind\":\"$kind\",\"every\":$every,\"round\":$r,\"wall_s\":$(echo "$t1 - $t0" | bc),\"result\":$line}" \
    | tee -a "$out"
}
for ((r = 1; r <= rounds; r++)); do
  rm -rf "$work/ck"
  timed cohort none "$root/build/apps/mlp" "${job[@]}"
  timed cohort faultfree "$root/build/apps/mlp" "${job[@]}" --checkpoint.dir="$work/ck" --checkpoint.every="$every"
  rm -rf "$work/ck"
  timed cohort fault "$root/build/apps/mlp" "${job[@]}" --checkpoint.dir="$work/ck" --checkpoint.every="$every" \
    --launch.max-restarts=3 --fault.signal=KILL --fault.signal-rank=1 --fault.signal-step=119
  timed cohort recover-none "$root/build/apps/mlp" "${job[@]}" --fault.recover=true
  timed cohort recover-fault "$root/build/apps/mlp" "${job[@]}" --fault.recover=true \
    --fault.signal=KILL --fault.signal-rank=1 --fault.signal-step=119
  line=$($py "$peers/elastic_torch.py" --rounds 1 --ckpt-every "$every" --kill-step 120 --steps 300 2>/dev/null | tail -n 1)
  echo "{\"side\":\"torch\",\"kind\":\"both\",\"every\":$every,\"round\":$r,\"result\":${line:-{\}}}" | tee -a "$out"
done
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda v: statistics.median(v) if v else float("nan")
def pick(side, kind): return [r for r in rows if r["side"] == side and r["kind"] == kind]
rounds = sorted({r["round"] for r in rows})
lost_c, lost_t, over, per_ck, redone, equal = [], [], [], [], [], []
lost_r, rec_s, equal_r, over_r = [], [], [], []
for n in rounds:
    c = {r["kind"]: r for r in rows if r["side"] == "cohort" and r["round"] == n}
    if {"none", "faultfree", "fault"} <= set(c):
        lost_c.append(c["fault"]["wall_s"] - c["faultfree"]["wall_s"])
        cks = len(c["faultfree"]["result"].get("checkpoints", []))
        d = c["faultfree"]["wall_s"] - c["none"]["wall_s"]
        over.append(d / c["none"]["wall_s"])
        if cks: per_ck.append(d / cks)
        rec = c["fault"]["result"].get("recoveries", [])
        if rec: redone.append(rec[0].get("steps_redone"))
        equal.append(c["fault"]["result"].get("final_loss") == c["faultfree"]["result"].get("final_loss"))
    if {"recover-none", "recover-fault", "none"} <= set(c):
        lost_r.append(c["recover-fault"]["wall_s"] - c["recover-none"]["wall_s"])
        over_r.append(c["recover-none"]["wall_s"] / c["none"]["wall_s"] - 1)
        rec = c["recover-fault"]["result"].get("recoveries", [])
        step_s = c["recover-none"]["result"]["prediction"].get("measured_step_s", 0)
        if rec: rec_s.append(rec[0].get("recover_s") + step_s)  # the recovery and the interrupted step's work
        equal_r.append(c["recover-fault"]["result"].get("final_loss") == c["none"]["result"].get("final_loss"))
    t = [r for r in rows if r["side"] == "torch" and r["round"] == n]
    if t and t[0]["result"].get("results"):
        lw = t[0]["result"]["results"][0].get("lost_wall_s")
        if lw: lost_t.append(lw[1])
print()
print(f"checkpoint every {rows[0]['every']} steps, {len(rounds)} rounds (medians)")
print(f"time lost to one SIGKILL: cohort {med(lost_c):.3f} s, torchrun {med(lost_t):.3f} s, "
      f"torchrun / cohort {med(lost_t) / med(lost_c):.1f}x")
print(f"cohort steps redone {redone}, final loss equal to the fault-free run's: {equal}")
if lost_r:
    # the wall-time difference is no measure here: after the loss both ranks run in one process,
    # whose in-process allreduce is faster on this machine than TCP between two
    print(f"recovery inside the job (--fault.recover): detection to the redone step plus the interrupted "
          f"step's work {med(rec_s):.3f} s ({[round(x, 4) for x in rec_s]}), torchrun / cohort "
          f"{med(lost_t) / med(rec_s):.0f}x; wall time against fault-free {med(lost_r):+.3f} s; final loss "
          f"equal: {equal_r}; fault-free cost of committing after the loss sum {100 * med(over_r):+.1f} %")
print(f"cohort checkpoint cost: {100 * med(over):.2f} % of the run, {1e3 * med(per_ck):.1f} ms per checkpoint, "
      f"{100 * med(per_ck) / 60:.3f} % at one a minute")
print(f"\nruns: {sys.argv[1]}")
PY
