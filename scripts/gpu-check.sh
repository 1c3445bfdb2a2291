#!/usr/bin/env bash
# The device check (issue 20): one script to run on a machine with an NVIDIA GPU, everything it
# measures in one output folder. Today's phases: the device, a CUDA build (Release, sm_90), the
# CUDA test suite (every CUDA kernel against the CPU reference; without a device each case says
# it skipped), and the GPU benchmarks that exist (none yet: the GPU path is issue 20's work).
# Each phase shows a progress line with its rate and ETA on a terminal (ninja's and ctest's
# counts), and one line when it ends (always; the only line where stderr is not a terminal).
#   scripts/gpu-check.sh [OUT_DIR]        (default: $OUT, else bench/records/gpu-check-DATE)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${OUT:-$root/bench/records/gpu-check-$(date +%Y%m%d-%H%M%S)}}
mkdir -p "$out"
build=${COHORT_GPU_BUILD:-$root/build-gpu}
tty=0
[ -t 2 ] && tty=1
summary="$out/summary.txt"
: >"$summary"
phases=4 phase_no=1  # the device is phase 1; phase_run numbers the others

# phase_run NAME LOG COMMAND...: runs COMMAND with its output in LOG; on a terminal a line redrawn
# from the "[n/m]" (ninja) or "n/m Test" (ctest) counts it prints, with the rate and the ETA;
# then the phase's one line (its time, and the count when there was one). Fails as COMMAND does.
phase_run() {
  local name=$1 log=$2; shift 2
  phase_no=$((phase_no + 1))
  local start rc=0
  start=$(date +%s.%N)
  set +e  # the command's own status, not the pipeline's: PIPESTATUS right after it
  "$@" 2>&1 | tee "$log" | awk -v tty="$tty" -v label="[$phase_no/$phases] $name" -v t0="$start" '
    function now() { "date +%s.%N" | getline t; close("date +%s.%N"); return t }
    {
      done = ""; total = ""
      if (match($0, /^\[[0-9]+\/[0-9]+\]/)) { split(substr($0, 2, RLENGTH - 2), a, "/"); done = a[1]; total = a[2] }
      else if (match($0, /^ *[0-9]+\/[0-9]+ Test/)) { s = $0; sub(/^ */, "", s); split(s, a, "[/ ]"); done = a[1]; total = a[2] }
      if (done != "" && total > 0) {
        last_done = done; last_total = total
        if (tty == 1) {
          el = now() - t0; if (el < 0.001) el = 0.001
          rate = done / el; eta = rate > 0 ? (total - done) / rate : 0
          printf "\r%s %d/%d  %.1f/s  eta %ds\033[K", label, done, total, rate, eta > "/dev/stderr"
        }
      }
    }
    END { if (last_total != "") printf "%d/%d\n", last_done, last_total > "/dev/stdout" }' >"$log.count"
  rc=${PIPESTATUS[0]}
  set -e
  local secs count
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  count=$(cat "$log.count" 2>/dev/null || true)
  rm -f "$log.count"
  local line="gpu-check: [$phase_no/$phases] $name: $([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")${count:+, $count} in ${secs} s (log $(basename "$log"))"
  [ "$tty" = 1 ] && printf '\r\033[K' >&2
  echo "$line" >&2
  echo "$line" >>"$summary"
  return "$rc"
}

# 1. the device
device="no NVIDIA device (nvidia-smi absent or failed): the GPU cases report skips"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  >"$out/device.txt" 2>&1; then
  device=$(head -n 1 "$out/device.txt")
fi
echo "gpu-check: [1/$phases] device: $device" | tee -a "$summary" >&2
# 2. a CUDA build
[ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu-check: no CUDA toolkit at /usr/local/cuda" | tee -a "$summary" >&2; exit 1; }
phase_run "configure + build (Release, CUDA sm_90)" "$out/build.log" \
  bash -c "cmake -S '$root' -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release -DWITH_CUDA=ON -DCOHORT_WERROR=ON >/dev/null &&
           cmake --build '$build' -j \"\$(nproc)\" --target test_cuda"
# 3. the CUDA suite, through ctest (its "n/m Test" lines give the progress)
phase_run "CUDA tests (kernels against the CPU reference)" "$out/tests.log" \
  ctest --test-dir "$build" -R "CUDA|cuBLAS|NCCL|missing device" --output-on-failure -V --timeout 300
skipped=$(grep -c "comparison skipped" "$out/tests.log" || true)
echo "gpu-check: CUDA test output lines that say they skipped for want of a device: $skipped" | tee -a "$summary" >&2
# 4. benchmarks
echo "gpu-check: [4/$phases] GPU benchmarks: none yet (the GPU path is issue 20's work)" | tee -a "$summary" >&2
echo "gpu-check: results in $out" >&2
