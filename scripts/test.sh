#!/usr/bin/env bash
# Installs what is missing, fetches the Tier A data, builds (warnings are errors) and runs
# every test through ctest. Extra arguments go to ctest (e.g. -R kernels).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh
bash scripts/fetch-data.sh
build=${COHORT_TEST_BUILD:-build-test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOHORT_WERROR=ON
jobs=$(nproc)
cmake --build "$build" -j "$jobs"
cd "$build"
ctest --output-on-failure -j "$jobs" --timeout 900 "$@"
