// The worker actor: one (replica, stage, tensor-parallel rank) of a plan on its own thread
// (collectives block, so a worker never holds a scheduler thread). It builds its stage
// worker from the compiled plan, attaches its parameter storage to its parameter actor (a
// respawned worker is refilled that way), then runs a step whenever the coordinator asks:
// it applies the last committed gradient to its parameters (on its own thread, where they
// are warm in cache), fetches micro-batches from the data actor and hands its new gradient
// piece to its parameter actor. It monitors the coordinator and stops when it goes.
//
//   // How the coordinator starts one worker; the monitor tells it when the worker dies:
//   worker_hdl start_worker(caf::event_based_actor* self, std::shared_ptr<const compiled_model> model, int rank,
//                           data_actor_hdl data, param_actor_hdl params, fabric_ptr fabric, std::int64_t generation) {
//     auto spec = std::make_shared<worker_spec>();
//     spec->at = planner::rank_layout(model->plan).place_of(rank);
//     spec->model = std::move(model);
//     spec->rank = rank;
//     spec->table = kernels::cpu_kernels();
//     add_comm_kernels(spec->table);
//     spec->coordinator = caf::actor_cast<caf::actor>(self);
//     spec->data = std::move(data);
//     spec->params = std::move(params);
//     return caf::actor_cast<worker_hdl>(
//         self->spawn<worker_actor, caf::monitored>(std::shared_ptr<const worker_spec>(spec), std::move(fabric), generation));
//   }
#pragma once

#include <chrono>
#include <memory>

#include "actors/compile.hpp"
#include "actors/messages.hpp"
#include "actors/param_actor.hpp"
#include "actors/table_exchange.hpp"
#include "actors/task_trace.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/thread_pool.hpp"

namespace cohort::actors {

/// Fails a chosen worker at a chosen step and task, in the first generation only (a test hook).
struct failure_injection {
  int rank = -1;
  std::int64_t step = -1;
  std::size_t task_index = 0;
  bool armed() const { return rank >= 0 && step >= 0; }
};

struct worker_spec {
  std::shared_ptr<const compiled_model> model;
  worker_place at;
  int rank = 0;
  std::uint64_t seed = 0;
  int kernel_threads = 1;
  /// The core (of the process's) its thread is bound to; -1: the OS places it.
  int core = -1;
  std::chrono::milliseconds timeout{60000};
  kernels::dispatch_table table{"cpu"};
  caf::actor coordinator;
  data_actor_hdl data;
  param_actor_hdl params;
  failure_injection inject;
  double slow_factor = 1;  // the test hook --fault.slow-factor: each step's work keeps the core this many times as long
  table_exchange exchange;  // sync or geo, with the steps where replicas must agree
  trace_window trace;       // steps whose task spans the worker records
  /// The parameter actor holds the values (a plan transition's new piece): skip the initial ones.
  bool restore = false;
  /// Buddy copies (replicas.hpp): the rank that keeps a copy of this rank's piece (-1: none),
  /// and the copies this worker keeps, by the rank they copy (the coordinator holds them: they
  /// outlive the worker, a recovery reads them).
  int buddy = -1;
  std::vector<std::pair<int, piece_ptr>> copies;
  std::size_t slots = 0;  // optimizer slots per piece (a seed's)
};

class worker_actor : public caf::blocking_actor {
 public:
  worker_actor(caf::actor_config& cfg, std::shared_ptr<const worker_spec> spec, fabric_ptr fabric,
               std::int64_t generation);
  void act() override;
  const char* name() const override { return "cohort.worker"; }

 private:
  status start();
  step_outcome run_step(std::int64_t step, std::int64_t committed);
  /// The copies kept here take `step`'s gradients (and, at a plan's first step, their seeds).
  status keep_copies(std::int64_t step);

  std::shared_ptr<const worker_spec> spec_;
  fabric_ptr fabric_;
  std::int64_t generation_;
  std::unique_ptr<kernels::thread_pool> pool_;
  std::unique_ptr<stage_worker> worker_;
  piece_ptr piece_;  // lent by the parameter actor: committed gradients are applied here
  /// Buddy copies: this worker's seed went out, the copies it keeps were seeded (once per
  /// worker: every plan's workers are new), the dense gradients of copies with tables.
  bool seed_sent_ = false;
  std::vector<tensor> copy_scratch_;
};

}  // namespace cohort::actors
