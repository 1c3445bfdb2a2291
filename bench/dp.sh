#!/usr/bin/env bash
# Data parallelism on the 2 cores against PyTorch DDP over gloo, interleaved in one run:
#   cohort  mlp --data.name=synth 784-1024-1024-10, plain SGD lr 0.05, --plan.dp=2,
#           global batch 256 (128 per replica), 1 thread per replica, 200 timed steps
#   cohort-2proc  the same over 2 OS processes (--launch.nproc=2, 1 thread each), TCP data plane
#   cohort-2ucx   the same over the UCX data plane (shared memory)
#   torch   ../shared/bench/ddp_torch.py --world 2 --threads 1 (batch 128 per rank)
#   bench/dp.sh [REPS] [quiet|loaded|both]     (default 3 quiet)
# loaded: every run, of every side, has bench/neighbour.py beside it (one CPU-bound thread of
# seeded integer arithmetic, started before the run and killed after), as a node's data loader
# or monitor would; both: each round runs every side quiet, then every side loaded.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
modes=${2:-quiet}
[ "$modes" = both ] && modes="quiet loaded"
out="$root/bench/results/dp-$(date +%Y%m%d-%H%M%S).jsonl"
neighbour=
start_neighbour() { $py "$root/bench/neighbour.py" 7 & neighbour=$!; sleep 0.3; }
stop_neighbour() { [ -n "$neighbour" ] && kill "$neighbour" 2>/dev/null && wait "$neighbour" 2>/dev/null || true; neighbour=; }
trap stop_neighbour EXIT
run_side() {  # SIDE COMMAND...: one run in this round's mode, with the neighbour beside it when loaded
  local side=$1; shift
  [ "$mode" = loaded ] && start_neighbour
  run "$side" mlp "$config" "$@"
  stop_neighbour
}
for ((r = 1; r <= reps; r++)); do
 for mode in $modes; do
  config=dp2; [ "$mode" = loaded ] && config="dp2 loaded"
  run_side cohort "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
    --train.batch=256 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
    --train.threads=2 --plan.dp=2
  run_side cohort-2proc "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
    --train.batch=256 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
    --plan.dp=2 --launch.nproc=2
  run_side cohort-2ucx "$root/build/apps/mlp" --data.name=synth --model.dims=784,1024,1024,10 \
    --train.batch=256 --train.steps=210 --train.warmup=10 --train.lr=0.05 --train.momentum=0 \
    --plan.dp=2 --launch.nproc=2 --dist.transport=ucx
  run_side torch $py "$peers/ddp_torch.py" --world 2 --threads 1
 done
done
table torch
