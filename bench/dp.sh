#!/usr/bin/env bash
# Data parallelism on the 2 cores against PyTorch DDP over gloo, interleaved in one run:
#   cohort  mlp --data.name=synth 784-1024-1024-10, plain SGD lr 0.05, --plan.dp=2,
#           global batch 256 (128 per replica), 1 thread per replica, 200 timed steps
#   cohort-2proc  the same over 2 OS processes (--launch.nproc=2, 1 thread each), TCP data plane
#   cohort-2ucx   the same over the UCX data plane (shared memory)
#   torch   ../shared/bench/ddp_torch.py --world 2 --threads 1 (batch 128 per rank)
#   bench/dp.sh [REPS]     (default 3)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
out="$root/bench/results/dp-$(date +%Y%m%d-%H%M%S).jsonl"
for ((r = 1; r <= reps; r++)); do
  run cohort mlp dp2 "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
    --train.batch=256 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
    --train.threads=2 --plan.dp=2
  run cohort-2proc mlp dp2 "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
    --train.batch=256 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
    --plan.dp=2 --launch.nproc=2
  run cohort-2ucx mlp dp2 "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
    --train.batch=256 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
    --plan.dp=2 --launch.nproc=2 --dist.transport=ucx
  run torch mlp dp2 $py "$peers/ddp_torch.py" --world 2 --threads 1
done
table torch
