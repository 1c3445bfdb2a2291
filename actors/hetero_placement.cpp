// The heterogeneous pipeline's cores.
#include "actors/hetero_placement.hpp"

#include <set>

#include "planner/rank_layout.hpp"

namespace cohort::actors {

std::vector<int> hetero_cores(const planner::parallel_plan& plan, const std::vector<bool>& local, int cores) {
  const int ranks = plan.ranks();
  std::vector<int> core(static_cast<std::size_t>(ranks), -1);
  if (plan.pp != 2 || cores < 2) return core;
  const planner::rank_layout layout(plan);
  bool stage[2] = {false, false};
  for (int r = 0; r < ranks && r < static_cast<int>(local.size()); ++r)
    if (local[static_cast<std::size_t>(r)]) stage[layout.place_of(r).stage] = true;
  if (!stage[0] || !stage[1]) return core;
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

std::string describe_hetero_cores(const planner::parallel_plan& plan, const std::vector<int>& cores) {
  std::set<int> of[2];
  const planner::rank_layout layout(plan);
  for (int r = 0; r < static_cast<int>(cores.size()) && r < plan.ranks(); ++r)
    if (cores[static_cast<std::size_t>(r)] >= 0 && layout.place_of(r).stage < 2)
      of[layout.place_of(r).stage].insert(cores[static_cast<std::size_t>(r)]);
  if (of[0].empty() && of[1].empty()) return "";
  auto list = [](const std::set<int>& s) {
    std::string out = s.size() == 1 ? "core " : "cores ";
    for (int c : s) out += (out.back() == ' ' ? "" : ", ") + std::to_string(c);
    return out;
  };
  return "the lookups' stage on " + list(of[0]) + ", the dense stage on " + list(of[1]);
}

}  // namespace cohort::actors
