// The runtime's messages. Every control message carries the job's generation: after a
// failure the coordinator moves to a new generation, and a reply or request from an older
// one is ignored, so a worker that wakes up late cannot corrupt the redone step.
//
// Protocol of one step (generation g, step k; c = the last committed step):
//   coordinator -> worker        (step_atom, g, k, c)         => (done_atom, g, k, step_outcome)
//                                 the worker first applies its committed gradient (step c)
//   worker -> data actor         (batch_atom, k, replica) => micro_batch (all its micro-batches' rows)
//   coordinator -> data actor    (configure_atom, data_split) (a new plan: how the stream is cut from a step on)
//   worker -> parameter actor    (update_atom, g, k, piece_gradient) => ok_atom (the gradient
//                                 waits; dense, with sparse tables' entries beside it)
//   worker <-> worker (data plane) geo mode, before step k: the dp group's kept table rows and
//                                 their deltas (table_exchange.hpp), on the workers' threads
// Plan transitions (at a step boundary, every worker idle):
//   coordinator -> planner actor (plan_atom, change, current model) => decided_plan (the new plan, re-plan seconds)
//   coordinator -> planner actor (transfer_atom, decided_plan, current model) => transition_plan
//   coordinator -> planner actor (replan_atom, devices, threads, current model) => decided_plan (after a loss:
//                  the plan for the devices that remain)
//   coordinator -> param actor   (export_atom, c)              => piece_state (applies what c covers)
//   coordinator -> control proxy (call_atom, blocking_call)    => ok_atom (multi-process sums, the
//                                 plan's broadcast, a new data plane, the state exchange; each
//                                 on the proxy's own thread, never the coordinator's)
// Start and recovery:
//   worker -> parameter actor    (attach_atom, tensor view)   => piece_ptr (adopt the worker's
//                                 storage, or refill a respawned worker's; lend the piece)
//   coordinator -> param actor   (rollback_atom, g', c)       => ok_atom (apply what c covers,
//                                 drop the rest)
//   coordinator -> worker        (reset_atom, g', fabric)     => ok_atom (new channel)
// End:
//   coordinator -> param actor   (fetch_atom, c)              => tensor (the piece itself: the run is over)
//
// Tensors travel inside the message in one process (shared storage, no copy). These types
// are local-only (CAF_ALLOW_UNSAFE_MESSAGE_TYPE): between processes, control goes over the
// control plane and tensors over the data plane (transport/), never CAF's middleman.
// Errors cross the CAF boundary with their cohort code (to_caf / from_caf), so an app can tell
// bad input (exit 2) from a failed run (exit 1).
//
//   caf::error e = to_caf(make_error(errc::invalid_argument, "--plan.dp=3: 64 rows do not split"));
//   assert(from_caf(e).code == errc::invalid_argument);     // the cohort code survives the CAF boundary
//   caf::message step = caf::make_message(step_atom::value, /*generation=*/std::int64_t{0}, /*step=*/std::int64_t{4},
//                                         /*committed=*/std::int64_t{3});
//   caf::message call = caf::make_message(call_atom::value, blocking_call{[] { /* a control-plane collective */ }});
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/protocol.hpp"
#include "actors/step_protocol.hpp"
#include "actors/worker_step.hpp"
#include "graph/tensor.hpp"
#include "transport/fabric.hpp"
#include "transport/in_process.hpp"

namespace cohort::actors {

/// The data inputs of one micro-batch, by input name.
struct micro_batch {
  std::map<std::string, tensor> inputs;
};

/// How the data actor cuts the stream: from step `from_step` on (its first sample
/// `from_sample`; -1: from_step x batch), `batch` samples a step, split by planner::batch_split
/// over `dp` replicas of `micro_batches`; the source's batches have `source_rows` (0: batch).
struct data_split {
  int dp = 1, micro_batches = 1;
  std::int64_t batch = 0;
  std::int64_t source_rows = 0;
  bool prefetch = false;
  std::int64_t from_step = 0, from_sample = -1;
};

/// A cohort error as a CAF error (category "cohort", the errc as its code, the message as
/// its context), and back: any other CAF error becomes errc::closed with CAF's rendering.
caf::error to_caf(const error& e);
error from_caf(const caf::error& e);

/// Work that blocks (a control-plane collective, a data-plane exchange), run on the control
/// proxy's thread; it stores its result where the caller can read it once ok_atom arrives.
struct blocking_call {
  std::function<void()> run;
};

}  // namespace cohort::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::tensor)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::micro_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::data_split)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::fabric_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::step_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::step_metrics)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::blocking_call)
