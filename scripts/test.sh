#!/usr/bin/env bash
# Installs what is missing, fetches the Tier A data, builds (warnings are errors) and runs
# every test through ctest; then builds the layers below the driver with AddressSanitizer and
# UndefinedBehaviorSanitizer (the dev preset) and runs their suites (graph, kernels, transport,
# planner, actors). Extra arguments go to ctest (e.g. -R kernels, -L failure) and skip the
# sanitizer pass; COHORT_SKIP_SANITIZE=1 skips it too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh
bash scripts/fetch-data.sh
build=${COHORT_TEST_BUILD:-build-test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOHORT_WERROR=ON
jobs=$(nproc)
cmake --build "$build" -j "$jobs"
(cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 900 "$@")
if [ $# -gt 0 ] || [ "${COHORT_SKIP_SANITIZE:-0}" = 1 ]; then exit 0; fi

echo "== sanitizers: ASan + UBSan build of graph, kernels, transport, planner, actors and their suites"
suites="test_graph test_kernels test_transport test_planner test_actors"
cmake --preset dev > /dev/null
# shellcheck disable=SC2086
cmake --build build-dev -j "$jobs" --target $suites
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for suite in $suites; do
  echo "-- $suite (sanitized)"
  "build-dev/test/$suite" --no-intro=true --minimal=true
done
echo "sanitizers: every suite passed"
