// The parameter actor: owns one worker's piece of parameters and its optimizer state.
// Gradients arrive at the end of a step and wait; the coordinator commits the step once
// every worker finished it, and only then is the update applied (in place, into the
// worker's parameter storage it attached). A failed step is rolled back by dropping what
// waits, so nothing is ever undone; requests from an older generation are ignored.
//
//   auto p = sys.spawn(param_actor, adamw_config{...});
//   worker:      (attach_atom, view) ; (update_atom, g, k, grad_piece)
//   coordinator: (commit_atom, k) ; (rollback_atom, g')
#pragma once

#include <memory>

#include "actors/messages.hpp"
#include "actors/param_shard.hpp"

namespace cohort::actors {

struct param_state {
  optimizer_config optimizer;
  std::unique_ptr<param_shard> shard;
  std::int64_t generation = 0;
  tensor pending;                 // the gradient waiting for its commit
  std::int64_t pending_step = -1;
  static inline const char* name = "cohort.params";

  status attach(tensor storage);
  status submit(std::int64_t generation, std::int64_t step, tensor grad);
  status commit(std::int64_t step);
  void rollback(std::int64_t new_generation);
};

caf::behavior param_actor(caf::stateful_actor<param_state>* self, optimizer_config optimizer);

}  // namespace cohort::actors
