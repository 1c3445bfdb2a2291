// The keys of a job's control-plane collectives (transport/control_plane.hpp). Every process
// calls the job's collectives in the same order; a key's messages are taken in the order they
// came, so a key is used again by the next collective of its kind (a second data plane's
// address exchange, every step's loss gets its own).
//
//   // On every process of a job, at the same point: process 0's plan, then a step's loss.
//   status share_plan_and_loss(transport::control_plane& control, const std::string& plan_text, double local_loss) {
//     auto plan = control.broadcast_text(key(control_key::first_plan), plan_text);   // process 0's text
//     if (!plan) return plan.error();
//     auto total = control.sum(step_loss_key(/*step=*/7), {local_loss});             // the job's loss
//     if (!total) return total.error();
//     return {};
//   }
#pragma once

#include <cstdint>

namespace cohort::apps {

enum class control_key : std::uint64_t {
  first_plan = 1,     // process 0's plan, to every process
  parameters = 2,     // the trained parameters' pieces, to process 0
  ucx_addresses = 3,  // every process's UCX worker address (all_gather_text: takes 3 and 4)
  task_times = 6,     // every rank's task times, for the refit
  plan_change = 7,    // process 0's decision at a plan transition
  rejoin = 8,         // every remaining process's committed step after a loss (all_gather_text: takes 8 and 9)
  trace = 10,         // the trace's clock readings and event lines (all_gather_text: takes 10 and 11)
  trace_clock = 12,   // process 0's clock, for the trace's offsets
  timed_steps = 13,   // how many timed steps process 0 counts (a replacement timed fewer)
};

inline std::uint64_t key(control_key k) { return static_cast<std::uint64_t>(k); }

/// The job's loss of step `step` (each step its own key, above every fixed one).
inline std::uint64_t step_loss_key(std::int64_t step) { return 16 + static_cast<std::uint64_t>(step); }

}  // namespace cohort::apps
