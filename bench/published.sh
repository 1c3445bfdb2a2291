#!/usr/bin/env bash
# cohort's cost model held against published large-scale runs (configs/published/runs.json):
# for each run, the step time its source reports (converted from the FLOP/s it states, with
# the source's own FLOP accounting) against cohort's prediction under the published layout
# (the source's dp, tp and pp, its stages cut as its runtime cuts them: runs.json's runtime; the
# planner picks micro-batches, schedule, sharding and recomputation, which the sources do not
# state) and under the planner's own choice. Prints
# published vs predicted throughput, the error per row and the mean absolute error. Nothing
# runs on a GPU: these are the cost model's predictions, on the device profiles in
# configs/devices (fitted to none of these runs).
#   bench/published.sh [RUN_ID_SUBSTRING...]      (default: every run)
#   OWN=0 bench/published.sh                       (skip the planner's own choice: faster)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" --target gpt >/dev/null
mkdir -p "$root/bench/results"
out="$root/bench/results/published-$(date +%Y%m%d-%H%M%S).jsonl"
OWN=${OWN:-1} /usr/bin/python3 "$root/bench/published.py" "$root" "$out" "$@"
echo "raw: $out"
