// Moving training state between processes in a plan transition: every process sends each
// other process, in one message over the old plan's data plane, the elements of its primary
// pieces that the other's new pieces need, and fills its own new pieces from what it holds and
// what it receives. Both sides derive the same copy list from the two plans (the planner
// actor's transition_plan), so the messages carry values only, in that list's order, and a
// message of the wrong length is refused. Pairs exchange in a fixed order (the lower process
// sends first), so no two processes wait on each other.
//
//   // One process's part of a transition from dp2 (a rank per process) to dp4 (two per process):
//   result<std::vector<piece_state>> move_state(transport::fabric& old_fabric, const transition_plan& plan,
//                                               const std::vector<piece_state>& old_states, int process) {
//     exchange_options o;
//     o.old_owner = {0, 1};  o.new_owner = {0, 0, 1, 1};
//     o.process = process;  o.processes = 2;  o.slots = 2;  o.steps = 10;  o.tag = 77;
//     auto moved = exchange_state(old_fabric, o, plan.copies, old_states, plan.to);
//     if (!moved) return moved.error();      // a peer late, a message of the wrong size, a closed fabric
//     return std::move(moved->states);       // filled for the new ranks of this process
//   }
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "actors/state_layout.hpp"
#include "transport/fabric.hpp"

namespace cohort::actors {

struct exchange_options {
  std::vector<int> old_owner, new_owner;  // the process of each old and new rank
  /// The process of each rank of the fabric the messages travel on (empty: old_owner, the old
  /// plan's data plane; after a lost process: the new placement's). Processes without a rank
  /// in it take no part (a lost process).
  std::vector<int> fabric_owner;
  /// By new rank: the old rank whose parameter actor stays (kept_pieces), -1 where the piece is
  /// filled here; empty: none stays. A kept rank's state is left empty.
  std::vector<int> kept;
  int process = 0, processes = 1;
  std::size_t slots = 0;   // optimizer slots per piece
  std::int64_t steps = 0;  // updates every piece has had (the steps done)
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
                                       const std::vector<state_copy>& copies,
                                       const std::vector<piece_state>& old_states, const std::vector<piece_layout>& to);

}  // namespace cohort::actors
