#!/usr/bin/env bash
# Allreduce between 2 processes on this machine, 4 KiB .. 64 MiB, interleaved in one run:
#   cohort-tcp   build/apps/cohort-allreduce --launch.nproc=2 --dist.transport=tcp
#   cohort-ucx   ... --dist.transport=ucx   (UCX picks shared memory between local processes)
#   gloo         ../shared/bench/allreduce_torch.py (PyTorch's gloo, TCP on loopback)
#   mpi-shm      Open MPI 4.1, shared memory (vader)
#   mpi-tcp      Open MPI 4.1, --mca btl self,tcp on lo
# Every side reports time per op (mean over iterations, the slower rank), algbw and busbw as
# nccl-tests do (busbw = algbw x 2(n-1)/n; n = 2 here). Then a table of medians over the
# repetitions and the ratios the issue asks for.
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
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sides = ["cohort-tcp", "cohort-ucx", "gloo", "mpi-shm", "mpi-tcp"]
by = {}  # (side, bytes) -> [busbw], [us_mean]
for r in rows:
    for x in r["result"].get("results", []):
        by.setdefault((r["side"], x["bytes"]), []).append((x["busbw_GBps"], x["us_mean"]))
sizes = sorted({b for (_, b) in by})
med = lambda side, b, i: statistics.median(v[i] for v in by[(side, b)]) if (side, b) in by else float("nan")
print()
print("busbw GB/s (median over runs; time per op = mean over iterations)")
print(f"{'bytes':>9} " + " ".join(f"{s:>11}" for s in sides) + "   ucx/gloo tcp/gloo ucx/mpi-shm tcp/mpi-tcp")
for b in sizes:
    v = {s: med(s, b, 0) for s in sides}
    print(f"{b:>9} " + " ".join(f"{v[s]:>11.3f}" for s in sides) +
          f"   {v['cohort-ucx']/v['gloo']:>8.2f} {v['cohort-tcp']/v['gloo']:>8.2f} {v['cohort-ucx']/v['mpi-shm']:>11.2f}"
          f" {v['cohort-tcp']/v['mpi-tcp']:>11.2f}")
print()
print("us per op (median over runs)")
for b in sizes:
    print(f"{b:>9} " + " ".join(f"{med(s, b, 1):>11.1f}" for s in sides))
PY
echo "raw: $out"
