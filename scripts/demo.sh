#!/usr/bin/env bash
# Installs what is missing, fetches the data, builds the apps (Release, into build/) and
# trains the default app: an MLP on Fashion-MNIST, with a progress line and a JSON summary.
# Arguments are passed to the app, e.g. scripts/demo.sh --train.steps=2000
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh
bash scripts/fetch-data.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target mlp gpt
echo "demo: build/apps/mlp --config-file=configs/mlp_fashion.ini $*"
build/apps/mlp --config-file=configs/mlp_fashion.ini "$@"
