#!/usr/bin/env bash
# Fails when a C++ file git tracks differs from what clang-format makes of it (.clang-format at
# the top); names each file and how many lines differ. `clang-format -i FILE` fixes it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (scripts/install-deps.sh installs it)"; exit 1; }
bad=0
while IFS= read -r f; do
  n=$(clang-format --style=file "$f" | diff "$f" - | grep -c '^[<>]')
  if [ "$n" -gt 0 ]; then echo "format: $f differs from clang-format in $n lines"; bad=1; fi
done < <(git ls-files '*.cpp' '*.hpp' '*.cu' 2>/dev/null)
[ $bad -eq 0 ] && echo "format: every C++ file follows .clang-format"
exit $bad
