#!/usr/bin/env bash
# Installs exactly the Debian 12 packages cohort needs; skips those already installed and
# waits for the dpkg lock instead of failing. Safe to run again.
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --bench    also the peers the benchmarks compare against
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config git           # toolchain
  clang-format                                   # the layout check (scripts/check-format.sh)
  libcaf-dev libssl-dev                          # actors (CAF 0.17); CAF's openssl headers need libssl
  libucx-dev ucx-utils iproute2                  # transport (iproute2: the two-namespace test)
  libfmt-dev doctest-dev nlohmann-json3-dev zlib1g-dev
  libopenblas-dev libopenblas0-pthread           # BLAS (the pthread variant)
  npm dpkg-dev ca-certificates xz-utils          # scripts/fetch-data.sh (npm pack, dpkg-deb)
  python3 python3-torch python3-numpy            # the PyTorch oracle test
  r-base-core                                    # scripts/fetch-data.sh reads MovieLens from R's dslabs data
  chromium fonts-dejavu-core                     # the run report's browser test (headless)
  prometheus                                     # the metrics endpoint test scrapes with it
  slurmctld slurmd slurm-client munge            # the Slurm test starts a one-machine cluster
)
if [ "${1:-}" = "--bench" ]; then
  packages+=(python3-sklearn python3-threadpoolctl openmpi-bin libopenmpi-dev hyperfine)
fi

missing=()
for p in "${packages[@]}"; do
  # an npm from outside Debian (e.g. NodeSource's nodejs) serves as well and conflicts with it
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
# python3-torch alone pulls netlib's reference BLAS; make OpenBLAS the provider.
if [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]; then
  $SUDO update-alternatives --set libblas.so.3-x86_64-linux-gnu \
    /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 >/dev/null 2>&1 || true
fi
# Debian starts the services it installs: Prometheus on :9090, and slurmctld/slurmd (which fail
# without a slurm.conf). The tests run their own on loopback, so those services are stopped and
# left disabled (start them yourself if you want them).
if command -v systemctl >/dev/null 2>&1; then
  for service in prometheus slurmctld slurmd; do
    if [[ " ${missing[*]} " == *" $service "* ]] && systemctl is-enabled --quiet "$service" 2>/dev/null; then
      $SUDO systemctl disable --now "$service" >/dev/null 2>&1 || true
      echo "install-deps: stopped and disabled the $service service Debian started (the tests run their own)"
    fi
  done
fi
echo "install-deps: done"
