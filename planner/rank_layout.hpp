// Where every rank of a plan sits — the one rank layout the coordinator, the compiler, the
// workers, the processes and the refit share. Ranks are numbered with the tensor-parallel
// rank fastest, then the pipeline stage, then the data-parallel replica:
// rank = (dp_rank * pp + stage) * tp + tp_rank. A job of several processes hosts the ranks in
// contiguous equal blocks (near-equal where they do not divide), so a tensor-parallel group
// (and, where blocks are large enough, a whole pipeline) stays inside one process.
//
//   rank_layout l(parallel_plan{.dp = 2, .tp = 2, .pp = 2});
//   int r = l.rank_of({.dp_rank = 1, .stage = 0, .tp_rank = 1});   // 5
//   rank_place at = l.place_of(5);                                   // {1, 0, 1}
//   std::vector<int> dp_peers = l.group(5, "dp");                    // {1, 5}
//   std::vector<int> host = l.process_of_rank(/*processes=*/2);      // {0,0,0,0,1,1,1,1}
//   assert(r == 5 && at.dp_rank == 1 && (dp_peers == std::vector<int>{1, 5}) && host[4] == 1);
//   std::vector<int> after = rank_layout::placed(6, {true, false, true});    // process 1 lost
//   assert((after == std::vector<int>{0, 0, 0, 2, 2, 2}));                  // its ranks 2, 3 to 0 and 2
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "graph/mesh.hpp"
#include "graph/placement.hpp"
#include "planner/plan.hpp"

namespace cohort::planner {

struct rank_place {
  int dp_rank = 0, stage = 0, tp_rank = 0;
};

class rank_layout {
 public:
  explicit rank_layout(const parallel_plan& p) : plan_(p) {}

  int ranks() const { return plan_.ranks(); }
  int rank_of(const rank_place& at) const { return (at.dp_rank * plan_.pp + at.stage) * plan_.tp + at.tp_rank; }
  rank_place place_of(int rank) const {
    return {rank / (plan_.pp * plan_.tp), (rank / plan_.tp) % plan_.pp, rank % plan_.tp};
  }
  /// The mesh {dp, pp, tp}, tp fastest: its row-major positions are the ranks.
  process_mesh mesh() const { return process_mesh({{"dp", plan_.dp}, {"pp", plan_.pp}, {"tp", plan_.tp}}); }
  /// The ranks that share every coordinate of `rank` but `axis` ("dp", "pp" or "tp"), in order.
  std::vector<int> group(int rank, const std::string& axis) const { return mesh().group(rank, axis); }
  /// The process hosting each rank when `processes` processes split the ranks into contiguous
  /// blocks: equal where they divide, else near-equal (graph/placement.hpp's shard_range, the
  /// first blocks one larger); with fewer ranks than processes, one rank each on the first.
  std::vector<int> process_of_rank(int processes) const { return blocks(ranks(), processes); }
  /// The same for any `ranks` ranks.
  static std::vector<int> blocks(int ranks, int processes) {
    std::vector<int> owner;
    const int parts = std::max(1, std::min(ranks, processes));
    for (int p = 0; p < parts; ++p)
      for (auto r = shard_range(ranks, parts, p); r.begin < r.end; ++r.begin) owner.push_back(p);
    return owner;
  }
  /// The process of each rank when only the processes with `live` true remain (all true: the
  /// blocks): every rank stays in its block's process, and each rank of a lost process goes to
  /// the remaining process that hosts the fewest ranks (the lowest-numbered on a tie), so that
  /// every process that remains computes the same placement from the same membership.
  static std::vector<int> placed(int ranks, const std::vector<bool>& live) {
    const int processes = static_cast<int>(live.size());
    std::vector<int> owner = blocks(ranks, processes);
    std::vector<int> load(live.size(), 0);
    for (int p : owner)
      if (live[static_cast<std::size_t>(p)]) ++load[static_cast<std::size_t>(p)];
    for (int& p : owner) {
      if (live[static_cast<std::size_t>(p)]) continue;
      int best = -1;
      for (int q = 0; q < processes; ++q)
        if (live[static_cast<std::size_t>(q)] &&
            (best < 0 || load[static_cast<std::size_t>(q)] < load[static_cast<std::size_t>(best)]))
          best = q;
      if (best < 0) return {};  // nobody remains
      p = best;
      ++load[static_cast<std::size_t>(best)];
    }
    return owner;
  }

 private:
  parallel_plan plan_;
};

}  // namespace cohort::planner
