#!/usr/bin/env bash
# Migrations (issue 18 items 4 and 7), interleaved rounds in one run:
#   migrate   mlp --data.name=synth 784-1024-1024-10, AdamW, batch 256, dp4 over 2 processes (1
#             thread each, each bound to its own core: --launch.bind-cores), the operator moving rank 1 to process 1 after step 60
#             (--elastic.migrate-at=60:1:1), 120 steps: the pause (the transition's `seconds`),
#             the state moved, of which the exchange
#   straggler dp6 over the same 2 processes, 200 steps, the process hosting rank 3 (process 1)
#             twice as slow (--fault.slow-rank=3 --fault.slow-factor=2: its workers burn each
#             forward and backward task's CPU time again), at batch 384 (64 samples per rank, as
#             above) and 1536: with --elastic.straggler-factor=1.5 --elastic.straggler-steps=10
#             (one of process 1's ranks moves to process 0) against without (the straggler
#             stays): the median step after the move (steps 41..200) against the same steps
#             without it (goal: >= 1.3x), beside the move's own prediction from the measured pace.
#             Two processes and six ranks: a move balances them (3 x 2 -> 2 x 2 against 4), at
#             most 1.5x; with dp4 (2 x 2 -> 1 x 2 against 3) it could win at most 1.33x
#   bench/straggler.sh [ROUNDS]     (default 3)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-3}
stamp=$(date +%Y%m%d-%H%M%S)
out="$root/bench/results/straggler-$stamp.jsonl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mlp=(--data.name=synth --model.dims=784,1024,1024,10 --train.batch=256 --train.optimizer=adamw --train.lr=0.001
     --train.threads=1 --plan.refit=false --fault.recover=true --plan.dp=4 --launch.nproc=2 --launch.bind-cores=true)
slow=(--plan.dp=6 --fault.slow-rank=3 --fault.slow-factor=2 --train.steps=200)
record() {  # record SIDE ROUND COMMAND...: one JSON line with the summary and the step times
  local side=$1 round=$2; shift 2
  local line
  line=$("$@" --metrics.file="$work/m.jsonl" 2>"$work/err" | tail -n 1) || true
  [ -n "$line" ] || line="{\"error\": $(tail -c 400 "$work/err" | $py -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}"
  $py - "$side" "$round" "$work/m.jsonl" "$line" <<'PY' | tee -a "$out"
import json, sys
side, rnd, metrics, line = sys.argv[1:5]
steps = []
try:
    steps = [json.loads(l)["step_s"] for l in open(metrics) if "event" not in json.loads(l)]
except OSError:
    pass
print(json.dumps({"side": side, "round": int(rnd), "step_s": steps, "result": json.loads(line)}))
PY
  rm -f "$work/m.jsonl"
}
for ((r = 1; r <= rounds; r++)); do
  record migrate $r "$root/build/apps/mlp" "${mlp[@]}" --train.steps=120 --elastic.migrate-at=60:1:1
  for batch in 384 1536; do
    record "relieved-$batch" $r "$root/build/apps/mlp" "${mlp[@]}" "${slow[@]}" --train.batch=$batch \
      --elastic.straggler-factor=1.5 --elastic.straggler-steps=10
    record "stays-$batch" $r "$root/build/apps/mlp" "${mlp[@]}" "${slow[@]}" --train.batch=$batch
  done
done
$py - "$out" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(v): return statistics.median(v) if v else float("nan")
m = [r["result"]["transitions"][0] for r in rows if r["side"] == "migrate" and r["result"].get("transitions")]
if m:
    print(f"migration of rank 1 (dp4 over 2): pause {min(x['seconds'] for x in m)*1e3:.0f}-{max(x['seconds'] for x in m)*1e3:.0f} ms "
          f"(median {med([x['seconds'] for x in m])*1e3:.0f}), exchange {med([x['move_s'] for x in m])*1e3:.0f} ms for "
          f"{med([x['bytes_across_processes'] for x in m])/1e6:.1f} MB, {len(m)} runs")
for batch in (384, 1536):
  ratios = []
  print(f"\nstraggler, dp6 over 2, batch {batch}:")
  for rnd in sorted({r["round"] for r in rows}):
    rel = [r for r in rows if r["round"] == rnd and r["side"] == f"relieved-{batch}"]
    stay = [r for r in rows if r["round"] == rnd and r["side"] == f"stays-{batch}"]
    if not rel or not stay or not rel[0]["result"].get("transitions"): continue
    t = rel[0]["result"]["transitions"][0]
    undone = [x for x in rel[0]["result"]["transitions"][1:] if "made the step slower" in x.get("why", "")]
    after = med(rel[0]["step_s"][40:]); before = med(stay[0]["step_s"][40:])
    p = re.search(r"predicted ([0-9.e-]+) s -> ([0-9.e-]+) s", t["why"])
    pred = float(p.group(1)) / float(p.group(2)) if p else float("nan")
    ratios.append(before / after)
    print(f"round {rnd}: {t['moved']} after step {t['step']}; step {before*1e3:.2f} ms with the straggler, "
          f"{after*1e3:.2f} ms after the move: {before/after:.2f}x (the move predicted {pred:.2f}x)"
          + (f"; undone after step {undone[0]['step']}: {undone[0]['why']}" if undone else ""))
  if ratios: print(f"median {med(ratios):.2f}x better (goal >= 1.3x)")
print(f"\nruns: {sys.argv[1]}")
PY
