#!/usr/bin/env bash
# scripts/progress.sh, the phase lines of fetch-data.sh: a fake download (a file grown in
# steps to a known total) on a pseudo-terminal redraws its share, rate and ETA and ends with one
# line; with stderr in a file only that one line comes. Exits non-zero naming what is wrong.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/fake.sh" <<SH
set -euo pipefail
source "$root/scripts/progress.sh"
cd "$work"
phase "download fake" 4000000 "fake.bin"
for i in 1 2 3 4; do head -c 1000000 /dev/zero >>fake.bin; sleep 0.3; done
phase_done fake.bin
SH
# stderr to a file: exactly one line
bash "$work/fake.sh" 2>"$work/plain.err"
lines=$(wc -l <"$work/plain.err")
[ "$lines" -eq 1 ] || { echo "expected 1 line on a file, got $lines:"; cat "$work/plain.err"; exit 1; }
grep -q '^fetch-data: download fake: 4.0 MB in [0-9.]* s ([0-9.]* MB/s)$' "$work/plain.err" ||
  { echo "unexpected line: $(cat "$work/plain.err")"; exit 1; }
grep -q $'\r' "$work/plain.err" && { echo "a carriage return on a file"; exit 1; }
# on a pseudo-terminal: redrawn lines with a share, the rate and an ETA, then the same last line
rm -f "$work/fake.bin"
script -qec "bash $work/fake.sh" "$work/tty.out" >/dev/null
tr '\r' '\n' <"$work/tty.out" >"$work/tty.txt"
grep -Eq '^fetch-data: download fake (25|50|75)% [0-9.]+ MB of 4.0 MB  [0-9.]+ MB/s  eta [0-9]+s' "$work/tty.txt" ||
  { echo "no redrawn progress line on the terminal:"; cat "$work/tty.txt"; exit 1; }
grep -q 'fetch-data: download fake: 4.0 MB in' "$work/tty.txt" || { echo "no final line on the terminal"; exit 1; }
echo "progress.sh: one line on a file, share/rate/ETA redrawn on a terminal"
