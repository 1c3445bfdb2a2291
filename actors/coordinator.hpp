// The coordinator actor's state: the plan's actors, the generation, the step in flight, and
// the decisions of the step protocol (commit when every worker succeeded, recover when one
// died or failed). Its behavior (coordinator.cpp) only turns messages into these calls.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "actors/runtime.hpp"

namespace cohort::actors {

struct coordinator_state {
  run_options options;
  std::shared_ptr<const compiled_model> model;
  caf::actor data;
  std::vector<caf::actor> params, workers;  // by rank
  std::vector<std::shared_ptr<const worker_spec>> specs;
  fabric_ptr fabric;
  std::int64_t generation = 0, step = 0;
  std::int64_t committed = -1;  // the last step every worker finished
  std::vector<std::optional<step_outcome>> outcomes;
  std::vector<bool> dead;
  int outstanding = 0;
  bool recovering = false;
  std::chrono::steady_clock::time_point run_start, step_start, detected_at;
  run_summary summary;
  caf::response_promise done;
  static inline const char* name = "cohort.coordinator";
};

caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, std::shared_ptr<const compiled_model> model,
                          run_options options, batch_fn data);

}  // namespace cohort::actors
