// What a process needs to come into a running job, as process 0 tells it on the control plane:
// a replacement in a lost process's place during the recovery it joins (coordinator_rejoin.cpp),
// or a process joining the running job at a step boundary (coordinator_join.cpp). The plan that
// runs (with its stage cuts), where every rank was before the change, which processes were in
// the job then, how many replacements had joined before, and the steps committed as process 0
// knew them (a replacement agrees on the exact number with the others afterwards); for a join,
// also the plan the job changes to as it grows (`next`, with the planner's figures). The
// processes already in the job read the same text for the plan they change to.
//
//   joining_state s;
//   s.plan.plan = {.dp = 2};
//   s.owner_before = {0, 1};
//   s.live_before = {true, true};
//   s.committed = 11;
//   auto back = joining_from_text(to_text(s), /*processes=*/2);   // validated: sizes, ranges, the plan
//   assert(back && back->committed == 11 && back->owner_before == s.owner_before);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/data_cursor.hpp"
#include "graph/error.hpp"
#include "planner/plan_choice.hpp"

namespace cohort::actors {

struct joining_state {
  planner::plan_choice plan;        // the plan that runs, with its cuts
  std::vector<int> owner_before;    // each rank's process before the loss
  std::vector<bool> live_before;    // the processes in the job before the loss
  std::size_t replaced_before = 0;  // replacements that had joined before this recovery
  std::int64_t committed = -1;      // the steps done, as process 0 knew them
  /// A join: the plan the job changes to (absent for a replacement: the plan stays), the
  /// planner's time to decide it and its predicted step time (0: none).
  std::optional<planner::plan_choice> next;
  double next_replan_s = 0, next_predicted_step_s = 0;
  /// The data cursor's stretches (which samples each step takes), and under
  /// --elastic.batch=scale the data-parallel degree the job's --train.batch is for (0: fixed).
  std::vector<cursor_stretch> cursor;
  int scale_base_dp = 0;
};

/// One line of JSON.
std::string to_text(const joining_state& s);

/// Parses and validates process 0's text for a job of `processes`: the plan, one owner per rank
/// (each a process of the job), one flag per process, committed >= -1, a next plan with
/// non-negative figures, cursor stretches in ascending steps with positive batches, a
/// non-negative base degree. Errors name the field.
result<joining_state> joining_from_text(const std::string& text, int processes);

}  // namespace cohort::actors
