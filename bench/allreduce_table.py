#!/usr/bin/env python3
"""Medians and ratios of bench/allreduce.sh runs: one run's file, or several pooled.

    bench/allreduce_table.py bench/results/allreduce-A.jsonl [more.jsonl ...]

Every round of every file counts once (the mean time per op over its iterations, the slower
rank); the table shows busbw (GB/s) from the median time per side and size, and the ratios the
issue asks for: cohort UCX and TCP against gloo, UCX against MPI-shm, TCP against MPI-TCP.
Single runs on a shared 2-core machine flip verdicts (both shared-memory sides are bimodal
here); pooling the rounds of several runs of the same code gives the figures to quote.
"""
import json
import statistics
import sys

SIDES = ["cohort-tcp", "cohort-ucx", "gloo", "mpi-shm", "mpi-tcp"]


def load(paths):
    times = {}  # (side, bytes) -> [us per op, one per round]
    for path in paths:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                for x in row["result"].get("results", []):
                    times.setdefault((row["side"], x["bytes"]), []).append(x["us_mean"])
    return times


def main(paths):
    if not paths:
        sys.exit(__doc__)
    times = load(paths)
    sizes = sorted({b for (_, b) in times})
    nan = float("nan")
    med = lambda side, b: statistics.median(times[(side, b)]) if (side, b) in times else nan
    rounds = max((len(v) for v in times.values()), default=0)
    print(f"\n{len(paths)} file(s), up to {rounds} rounds per side and size")
    print("busbw GB/s (median time per op over the rounds; time per op = mean over iterations)")
    print(f"{'bytes':>9} " + " ".join(f"{s:>11}" for s in SIDES) + "   ucx/gloo tcp/gloo ucx/mpi-shm tcp/mpi-tcp")
    for b in sizes:
        t = {s: med(s, b) for s in SIDES}
        bw = {s: b / t[s] / 1e3 for s in SIDES}  # busbw = algbw for 2 ranks; us -> GB/s
        print(f"{b:>9} " + " ".join(f"{bw[s]:>11.3f}" for s in SIDES) +
              f"   {t['gloo'] / t['cohort-ucx']:>8.2f} {t['gloo'] / t['cohort-tcp']:>8.2f}"
              f" {t['mpi-shm'] / t['cohort-ucx']:>11.2f} {t['mpi-tcp'] / t['cohort-tcp']:>11.2f}")
    print("\nus per op (median over the rounds)")
    for b in sizes:
        print(f"{b:>9} " + " ".join(f"{med(s, b):>11.1f}" for s in SIDES))


if __name__ == "__main__":
    main(sys.argv[1:])
