// The coordinator actor: the step protocol's decisions (actors/step_protocol.hpp) carried out.
// It owns this process's actors of the current plan — data actor, parameter actors, workers —
// the fabric they share, the planner actor and, in a job of several processes, the control
// proxy that runs the blocking calls. Every event handler only sends messages or asks with a
// timeout; nothing in it waits.
//
//   auto compiled = compile(tiny_mlp, {.dp = 2}, /*batch=*/64);
//   if (!compiled) return compiled.error();
//   run_options options;
//   options.plan = compiled->plan;  options.batch = 64;  options.steps = 10;
//   auto model = std::make_shared<const compiled_model>(std::move(*compiled));
//   auto coord = sys.spawn(coordinator, model, options, batch_fn(tiny_batch));   // what train() does
//   result<run_summary> out = make_error(errc::closed, "no answer from the coordinator");
//   caf::scoped_actor self{sys};
//   self->request(coord, caf::infinite, run_atom::value)
//       .receive([&](run_summary& s) { out = std::move(s); }, [&](caf::error& e) { out = from_caf(e); });   // the first error
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "actors/runtime.hpp"
#include "actors/step_protocol.hpp"

namespace cohort::actors {

struct coordinator_state {
  run_options options;
  std::shared_ptr<const compiled_model> model;  // the current plan
  batch_fn data_source;
  std::optional<step_protocol> protocol;
  caf::actor data, planner, proxy;
  std::vector<caf::actor> params, workers;       // by rank (empty handles: ranks of other processes)
  std::vector<std::shared_ptr<const worker_spec>> specs;
  fabric_ptr fabric;
  std::vector<int> owner;                        // the process of each rank
  run_summary summary;
  std::chrono::steady_clock::time_point run_start;
  caf::response_promise done;
  static inline const char* name = "cohort.coordinator";
};

caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, std::shared_ptr<const compiled_model> model,
                          run_options options, batch_fn data);

}  // namespace cohort::actors
