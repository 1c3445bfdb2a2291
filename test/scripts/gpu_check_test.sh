#!/usr/bin/env bash
# scripts/gpu-check.sh on this machine (a GPU is not needed): against the test's own build tree
# (up to date, so its build phase has little to do), it writes one line per phase — the device
# (none here), the CUDA build, the CUDA tests with their count, the benchmarks — into its output
# folder with each phase's log, and a phase that fails says so and stops it. Exit 77 (ctest: skipped) where there is no CUDA toolkit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
[ -x /usr/local/cuda/bin/nvcc ] || { echo "no CUDA toolkit at /usr/local/cuda: gpu-check skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
COHORT_GPU_BUILD="$build" bash "$root/scripts/gpu-check.sh" "$out" 2>"$out/stderr" ||
  { echo "gpu-check failed:"; cat "$out/stderr"; exit 1; }
for want in '^gpu-check: \[1/4\] device: ' '^gpu-check: \[2/4\] configure \+ build .*: ok, [0-9]+/[0-9]+ in [0-9.]+ s' \
            '^gpu-check: \[3/4\] CUDA tests .*: ok, [0-9]+/[0-9]+ in [0-9.]+ s' '^gpu-check: \[4/4\] GPU benchmarks'; do
  grep -Eq "$want" "$out/summary.txt" || { echo "no line matching $want in:"; cat "$out/summary.txt"; exit 1; }
done
for f in build.log tests.log summary.txt; do [ -s "$out/$f" ] || { echo "no $f in the output folder"; exit 1; }; done
grep -q $'\r' "$out/stderr" && { echo "a carriage return where stderr is a file"; exit 1; }
# a phase that fails is reported as failed, and the check stops with its status
touch "$out/not-a-directory"
if COHORT_GPU_BUILD="$out/not-a-directory" bash "$root/scripts/gpu-check.sh" "$out/failed" 2>"$out/failed.err"; then
  echo "gpu-check succeeded with a build tree that is a file"; exit 1
fi
grep -Eq '^gpu-check: \[2/4\] configure \+ build .*: FAILED \(exit [1-9][0-9]*\)' "$out/failed/summary.txt" ||
  { echo "the failed build is not reported as failed:"; cat "$out/failed/summary.txt"; exit 1; }
echo "gpu-check: every phase's line and log; a failed phase reported and stopping the check"
