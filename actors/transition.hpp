// Moving training state between processes in a plan transition: every process sends each
// other process, in one message over the old plan's data plane, the elements of its primary
// pieces that the other's new pieces need, and fills its own new pieces from what it holds and
// what it receives. Both sides derive the same copy list from the two plans (the planner
// actor's transition_plan), so the messages carry values only, in that list's order, and a
// message of the wrong length is refused. Pairs exchange in a fixed order (the lower process
// sends first), so no two processes wait on each other.
//
//   auto moved = exchange_state(*old_fabric, {.old_owner = {0, 1}, .new_owner = {0, 0, 1, 1},
//                               .process = p, .processes = 2, .slots = 1, .steps = 10, .tag = t},
//                               plan.copies, old_states, plan.to);
//   // moved->states[r] for the new ranks r of this process
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "actors/state_layout.hpp"
#include "transport/fabric.hpp"

namespace cohort::actors {

struct exchange_options {
  std::vector<int> old_owner, new_owner;  // the process of each old and new rank
  int process = 0, processes = 1;
  std::size_t slots = 0;                  // optimizer slots per piece
  std::int64_t steps = 0;                 // updates every piece has had (the steps done)
  std::uint64_t tag = 0;
  std::chrono::milliseconds timeout{60000};
};

struct exchanged_state {
  std::vector<piece_state> states;  // by new rank; filled for this process's ranks
};

/// Bytes of the copies between different processes (values and slots), the same on every process.
double bytes_across_processes(const std::vector<state_copy>& copies, const exchange_options& o);

/// `old_states` by old rank, filled for this process's primary pieces. Errors: a peer that
/// does not answer in time, a message of the wrong size, a closed fabric.
result<exchanged_state> exchange_state(transport::fabric& old_fabric, const exchange_options& o,
                                       const std::vector<state_copy>& copies, const std::vector<piece_state>& old_states,
                                       const std::vector<piece_layout>& to);

}  // namespace cohort::actors
