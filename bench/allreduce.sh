#!/usr/bin/env bash
# Allreduce between 2 processes on this machine, 4 KiB .. 64 MiB, interleaved in one run:
#   cohort-tcp   build/apps/cohort-allreduce --launch.nproc=2 --dist.transport=tcp
#   cohort-ucx   ... --dist.transport=ucx   (UCX picks shared memory between local processes)
#   gloo         ../shared/bench/allreduce_torch.py (PyTorch's gloo, TCP on loopback)
#   mpi-shm      Open MPI 4.1, shared memory (vader)
#   mpi-tcp      Open MPI 4.1, --mca btl self,tcp on lo
# Every side reports time per op (mean over iterations, the slower rank), algbw and busbw as
# nccl-tests do (busbw = algbw x 2(n-1)/n; n = 2 here). Then a table of medians over the
# repetitions and the ratios the issue asks for (bench/allreduce_table.py, which also pools the
# rounds of several runs: single runs here flip verdicts).
#   bench/allreduce.sh [REPS]     (default 3)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-3}
cmake --build "$root/build" --target cohort-allreduce >/dev/null
mpi_bin=$(mktemp /tmp/cohort-allreduce-mpi.XXXXXX)
mpicc -O2 -o "$mpi_bin" "$peers/allreduce_mpi.c"
out="$root/bench/results/allreduce-$(date +%Y%m%d-%H%M%S).jsonl"
mpirun_=(mpirun --allow-run-as-root --oversubscribe -np 2)
export UCX_NET_DEVICES=lo
for ((r = 1; r <= reps; r++)); do
  run cohort-tcp allreduce 2proc "$root/build/apps/cohort-allreduce" --launch.nproc=2 --dist.transport=tcp
  run cohort-ucx allreduce 2proc "$root/build/apps/cohort-allreduce" --launch.nproc=2 --dist.transport=ucx
  run gloo allreduce 2proc $py "$peers/allreduce_torch.py" --world 2
  run mpi-shm allreduce 2proc "${mpirun_[@]}" "$mpi_bin"
  run mpi-tcp allreduce 2proc "${mpirun_[@]}" --mca btl self,tcp --mca btl_tcp_if_include lo "$mpi_bin"
done
rm -f "$mpi_bin"
$py "$root/bench/allreduce_table.py" "$out"
echo "raw: $out"
