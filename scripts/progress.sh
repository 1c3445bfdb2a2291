#!/usr/bin/env bash
# Progress of a phase in a shell script (sourced): one line per phase with what came, its size,
# how long it took and the rate; on a terminal, while the phase runs, a line redrawn every 0.2 s
# from the sizes of the files it is writing — the share, rate and ETA where the total is known,
# the time so far where it is not.
#   source scripts/progress.sh
#   phase "download x" 33000000 "x_*.deb"     # LABEL, TOTAL_BYTES (0: unknown), FILE_GLOB...
#   apt-get download x >/dev/null
#   phase_done x_*.deb                         # "fetch-data: download x: 33.0 MB in 0.8 s (43.9 MB/s)"
# PROGRESS_PREFIX names the script in the lines (default fetch-data).

phase_start=0 poller="" phase_label=""
phase() {
  phase_label=$1 phase_start=$(date +%s.%N)
  local total=$2 prefix=${PROGRESS_PREFIX:-fetch-data}
  shift 2
  [ -t 2 ] || return 0
  (
    while sleep 0.2; do
      bytes=0
      for f in $@; do [ -f "$f" ] && bytes=$((bytes + $(stat -c %s "$f"))); done
      awk -v p="$prefix" -v l="$phase_label" -v b="$bytes" -v tot="$total" -v t0="$phase_start" -v t1="$(date +%s.%N)" \
        'BEGIN { s = t1 - t0; if (s < 0.001) s = 0.001; r = b / s;
                 eta = r > 0 ? sprintf("%ds", (tot - b) / r) : "?";
                 if (tot > 0) printf "\r%s: %s %d%% %.1f MB of %.1f MB  %.1f MB/s  eta %s\033[K", p, l, 100 * b / tot, b / 1e6, tot / 1e6, r / 1e6, eta;
                 else printf "\r%s: %s ... %ds\033[K", p, l, s }' >&2
    done
  ) &
  poller=$!
}
phase_done() {  # FILE...: the phase's one line, sized by the files it produced
  if [ -n "$poller" ]; then kill "$poller" 2>/dev/null || true; wait "$poller" 2>/dev/null || true; poller=""; fi
  local bytes=0 f
  for f in "$@"; do [ -f "$f" ] && bytes=$((bytes + $(stat -c %s "$f"))); done
  awk -v p="${PROGRESS_PREFIX:-fetch-data}" -v l="$phase_label" -v b="$bytes" -v t0="$phase_start" \
    -v t1="$(date +%s.%N)" -v tty="$([ -t 2 ] && echo 1)" \
    'BEGIN { s = t1 - t0; if (s < 0.001) s = 0.001; if (tty) printf "\r\033[K";
             printf "%s: %s: %.1f MB in %.1f s (%.1f MB/s)\n", p, l, b / 1e6, s, b / 1e6 / s }' >&2
}
