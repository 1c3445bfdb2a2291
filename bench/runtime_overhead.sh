#!/usr/bin/env bash
# The actor runtime's overhead: the same model with a 1-rank plan on the runtime
# (--plan.mode=manual) against the serial executor (--plan.mode=serial), interleaved,
# at 1 and 2 threads, for the synth MLP (200 timed steps) and the GPT on GPL-3 (30 timed).
#   bench/runtime_overhead.sh [REPS]     (default 3)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
out="$root/bench/results/overhead-$(date +%Y%m%d-%H%M%S).jsonl"
gpl=/usr/share/common-licenses/GPL-3
for ((r = 1; r <= reps; r++)); do
  for t in 1 2; do
    for mode in serial manual; do
      run "$mode" mlp "threads=$t" "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
        --train.batch=128 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
        --train.threads=$t --plan.mode=$mode
      run "$mode" gpt "threads=$t" "$root/build/apps/gpt" --data.file=$gpl --train.steps=33 --train.warmup=3 \
        --train.threads=$t --plan.mode=$mode
    done
  done
done
table serial
