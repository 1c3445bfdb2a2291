// The runtime's messages. Every control message carries the job's generation: after a
// failure the coordinator moves to a new generation, and a reply or request from an older
// one is ignored, so a worker that wakes up late cannot corrupt the redone step.
//
// Protocol of one step (generation g, step k; c = the last committed step):
//   coordinator -> worker        (step_atom, g, k, c)         => (done_atom, g, k, step_outcome)
//                                 the worker first applies its committed gradient (step c)
//   worker -> data actor         (batch_atom, k, replica) => micro_batch (all its micro-batches' rows)
//   worker -> parameter actor    (update_atom, g, k, tensor)  => ok_atom (the gradient waits)
// Start and recovery:
//   worker -> parameter actor    (attach_atom, tensor view)   => piece_ptr (adopt the worker's
//                                 storage, or refill a respawned worker's; lend the piece)
//   coordinator -> param actor   (rollback_atom, g', c)       => ok_atom (apply what c covers,
//                                 drop the rest)
//   coordinator -> worker        (reset_atom, g', fabric)     => ok_atom (new channel)
// End:
//   coordinator -> param actor   (fetch_atom, c)              => tensor (a copy of the piece)
//
// Tensors travel inside the message in one process (shared storage, no copy). These types
// are local-only for now (CAF_ALLOW_UNSAFE_MESSAGE_TYPE); crossing processes needs the
// raw-block serialization of ../shared/STACK.md §3a (a later issue).
#pragma once

#include <caf/all.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/worker_step.hpp"
#include "graph/tensor.hpp"
#include "transport/fabric.hpp"
#include "transport/in_process.hpp"

namespace cohort::actors {

using step_atom = caf::atom_constant<caf::atom("step")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using batch_atom = caf::atom_constant<caf::atom("batch")>;
using prepare_atom = caf::atom_constant<caf::atom("prepare")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using attach_atom = caf::atom_constant<caf::atom("attach")>;
using rollback_atom = caf::atom_constant<caf::atom("rollback")>;
using reset_atom = caf::atom_constant<caf::atom("reset")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using ok_atom = caf::atom_constant<caf::atom("ok")>;

/// The data inputs of one micro-batch, by input name.
struct micro_batch {
  std::map<std::string, tensor> inputs;
};

/// A fabric shared by the actors of one generation (closed when the generation ends).
using fabric_ptr = std::shared_ptr<transport::fabric>;

/// What a worker reports for a step; an error leaves `report` empty and sets `failure`.
struct step_outcome {
  int rank = -1;
  step_report report;
  std::string failure;
};

}  // namespace cohort::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::tensor)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::micro_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::fabric_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::step_outcome)
