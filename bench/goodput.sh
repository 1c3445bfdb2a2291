#!/usr/bin/env bash
# Goodput under one SIGKILL every 30 s over 5 minutes (issue 17 item 11), cohort against
# torchrun on the same job: bench/goodput.py says what runs; this sets up, keeps the records.
#   bench/goodput.sh [ROUNDS] [MINUTES] [EVERY_S] [goodput.py options, e.g. --sides cohort-replace,torch --victims nodes]
#   (default 1 round, 5 minutes, 30 s, every side, any process killed)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-1}
minutes=${2:-5}
every=${3:-30}
out="$root/bench/results/goodput-$(date +%Y%m%d-%H%M%S).jsonl"
COHORT_PEERS="$peers" $py "$root/bench/goodput.py" --rounds "$rounds" --minutes "$minutes" --every "$every" \
  --jsonl "$out" "${@:4}" | tee "${out%.jsonl}.txt"
echo "runs: $out"
