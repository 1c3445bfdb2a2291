# Shared by the bench scripts: set-up, one-JSON-line runs, a table of medians and ratios.
# Source it: root, peers, py, out are set; run SIDE MODEL CONFIG COMMAND... appends a line.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peers=${COHORT_PEERS:-$root/../shared/bench}
py=/usr/bin/python3
[ -f "$peers/mlp_torch.py" ] || { echo "bench: peer scripts not found in $peers (set COHORT_PEERS)" >&2; exit 2; }
bash "$root/scripts/install-deps.sh" --bench >/dev/null
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" --target mlp gpt cohort-allreduce >/dev/null
mkdir -p "$root/bench/results"

run() {  # run SIDE MODEL CONFIG COMMAND...
  local side=$1 model=$2 config=$3; shift 3
  local line
  line=$("$@" 2>/dev/null | tail -n 1)
  [ -n "$line" ] || line='{"error": "no output"}'
  echo "{\"side\":\"$side\",\"model\":\"$model\",\"config\":\"$config\",\"result\":$line}" | tee -a "$out"
}

# table BASELINE_SIDE: medians per (model, config) and the ratio of every other side to it
table() {
  $py - "$out" "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = sys.argv[2]
def rate(r):
    res = r["result"]
    return res.get("samples_per_s") or res.get("tokens_per_s") or res.get("rows_per_s")
keys = []
for r in rows:
    k = (r["model"], r["config"])
    if k not in keys: keys.append(k)
print()
print(f"{'model':6} {'config':24} {'side':8} {'median':>10} {'best':>10} {'ratio':>6}")
for k in keys:
    sides = {}
    for r in rows:
        if (r["model"], r["config"]) == k and rate(r):
            sides.setdefault(r["side"], []).append(rate(r))
    if base not in sides: continue
    bm = statistics.median(sides[base])
    for side, v in sides.items():
        m = statistics.median(v)
        ratio = "" if side == base else f"{m / bm:6.2f}"
        print(f"{k[0]:6} {k[1]:24} {side:8} {m:10.0f} {max(v):10.0f} {ratio:>6}")
print(f"\nruns: {sys.argv[1]}")
PY
}

# criteo_check_pair: sets data (COHORT_CRITEO_DIR, default /tmp/cohort-criteo) and writes
# criteo_synth.py's check pair there once (200k / 20k samples, tables capped at 100k rows).
criteo_check_pair() {
  data=${COHORT_CRITEO_DIR:-/tmp/cohort-criteo}
  mkdir -p "$data"
  if [ ! -f "$data/check_train.tsv.meta.json" ]; then
    $py "$peers/criteo_synth.py" --write "$data/check_train.tsv" --write-test "$data/check_test.tsv" \
      --rows 200000 --test-rows 20000 --max-rows 100000 >/dev/null
  fi
}
