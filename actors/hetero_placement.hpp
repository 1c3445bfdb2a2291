// Where the heterogeneous pipeline's workers run (--exec.mode=hetero): its two stages on two
// device classes. On a CPU machine the classes are disjoint sets of cores: in a process that
// holds ranks of both stages, the embedding stage's workers are bound to the first half of the
// cores it computes on and the dense stage's to the second half, so the table lookups and
// updates never take a core from the dense layers' GEMMs (nor evict their caches). A process
// that holds one stage only keeps all its cores for it (its workers stay where the OS puts
// them), as does one with a single core.
//
//   planner::parallel_plan p{.dp = 1, .tp = 1, .pp = 2, .micro_batches = 8};
//   auto cores = hetero_cores(p, {true, true}, 2);   // ranks 0 (stage 0) and 1 (stage 1) here
//   assert((cores == std::vector<int>{0, 1}));
//   std::puts(describe_hetero_cores(p, cores).c_str());   // "the lookups' stage on core 0, the dense stage on core 1"
#pragma once

#include <string>
#include <vector>

#include "planner/plan.hpp"

namespace cohort::actors {

/// The core (index into the process's cores) each rank's worker is bound to, -1 for a rank of
/// another process or one left unbound. `local`: the process's ranks; `cores`: how many it
/// computes on (its --train.threads within its affinity set).
std::vector<int> hetero_cores(const planner::parallel_plan& plan, const std::vector<bool>& local, int cores);
/// What hetero_cores chose, for the job's log: each stage's cores (indices into the process's
/// cores), "" where no worker is bound.
std::string describe_hetero_cores(const planner::parallel_plan& plan, const std::vector<int>& cores);

}  // namespace cohort::actors
