// The heterogeneous pipeline's cores.
#include "actors/hetero_placement.hpp"

#include "planner/rank_layout.hpp"

namespace cohort::actors {

std::vector<int> hetero_cores(const planner::parallel_plan& plan, const std::vector<bool>& local, int cores) {
  const int ranks = plan.ranks();
  std::vector<int> core(static_cast<std::size_t>(ranks), -1);
  const planner::rank_layout layout(plan);
  bool stage[2] = {false, false};
  for (int r = 0; r < ranks && r < static_cast<int>(local.size()); ++r)
    if (local[static_cast<std::size_t>(r)] && layout.place_of(r).stage < 2) stage[layout.place_of(r).stage] = true;
  if (plan.pp != 2 || cores < 2 || !stage[0] || !stage[1]) return core;
  const int first = cores / 2;  // stage 0: cores [0, first); stage 1: [first, cores)
  const int size[2] = {first, cores - first};
  int next[2] = {0, 0};  // round robin over a stage's cores, in rank order
  for (int r = 0; r < ranks && r < static_cast<int>(local.size()); ++r) {
    if (!local[static_cast<std::size_t>(r)]) continue;
    const int s = layout.place_of(r).stage;
    core[static_cast<std::size_t>(r)] = (s == 0 ? 0 : first) + next[s]++ % size[s];
  }
  return core;
}

}  // namespace cohort::actors
