#!/usr/bin/env bash
# Fails when a source file includes against DESIGN.md's layer arrows:
#   graph <- kernels, graph <- planner, graph <- transport,
#   graph, kernels, planner, transport, CAF <- actors <- apps
# (CAF only in actors/ and apps/; kernels, planner, transport never include one another.)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
allowed() {  # allowed LAYER -> the layers it may include
  case "$1" in
    graph) echo "graph" ;;
    kernels) echo "graph kernels" ;;
    planner) echo "graph planner" ;;
    transport) echo "graph transport" ;;
    actors) echo "graph kernels planner transport actors" ;;
    apps) echo "graph kernels planner transport actors apps" ;;
  esac
}
bad=0
for layer in graph kernels planner transport actors apps; do
  [ -d "$layer" ] || continue
  ok=$(allowed "$layer")
  while IFS= read -r hit; do
    file=${hit%%:*}
    inc=$(echo "$hit" | sed -E 's/.*#include *[<"]([^/">]+)\/.*/\1/')
    case "$inc" in
      caf)
        if [ "$layer" != actors ] && [ "$layer" != apps ]; then
          echo "layer violation: $file includes CAF (only actors/ and apps/ may)"; bad=1
        fi ;;
      graph|kernels|planner|transport|actors|apps)
        if ! echo " $ok " | grep -q " $inc "; then
          echo "layer violation: $file ($layer/) includes $inc/"; bad=1
        fi ;;
    esac
  done < <(grep -rnE '#include *[<"][a-z_]+/' "$layer" --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' 2>/dev/null)
done
[ $bad -eq 0 ] && echo "layers: every include follows DESIGN.md's arrows"
exit $bad
