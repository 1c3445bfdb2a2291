#!/usr/bin/env bash
# Serial speed against PyTorch on this machine, interleaved in one run (ABAB...):
#   mlp  --data.name=synth, 784-1024-1024-10, batch 128, 200 timed steps after 10 warm-up,
#        plain SGD lr 0.05            vs ../shared/bench/mlp_torch.py --mode synth
#   gpt  on GPL-3 (d=256, 4 layers, 4 heads, seq 128, batch 16, AdamW), 30 timed steps
#        after 3 warm-up              vs ../shared/bench/gpt_torch.py
# at 1 and 2 threads (compute + BLAS for both sides), REPS rounds (default 3).
# Prints one JSON line per run and a table of medians with the ratio cohort/PyTorch.
#   bench/serial.sh [REPS]          results also go to bench/results/serial-<date>.jsonl
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
out="$root/bench/results/serial-$(date +%Y%m%d-%H%M%S).jsonl"
gpl=/usr/share/common-licenses/GPL-3

for ((r = 1; r <= reps; r++)); do
  for t in 1 2; do
    run cohort mlp "threads=$t" "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
      --train.batch=128 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
      --train.threads=$t --plan.mode=serial
    run torch mlp "threads=$t" $py "$peers/mlp_torch.py" --mode synth --threads $t
    run cohort gpt "threads=$t" "$root/build/apps/gpt" --data.file=$gpl --train.steps=33 --train.warmup=3 \
      --train.threads=$t --plan.mode=serial
    run torch gpt "threads=$t" $py "$peers/gpt_torch.py" $gpl --threads $t
  done
done

table torch
