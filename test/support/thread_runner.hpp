// Runs a plan with every worker on its own thread over the in-process transport, each with
// a parameter shard it calls directly (no actors): the fastest way to compare a plan with
// the serial run. The actor runtime runs the same state structs (test/actors/runtime_test).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "actors/comm_kernels.hpp"
#include "actors/compile.hpp"
#include "actors/param_shard.hpp"
#include "actors/worker_step.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/threads.hpp"
#include "kernels/trainer.hpp"
#include "transport/in_process.hpp"

namespace cohort::test {

/// The global batch of a step, by input name ([B, ...] each).
using batch_fn = std::function<std::map<std::string, tensor>(std::int64_t step)>;

inline std::vector<float> serial_losses(const actors::model_fn& model, std::int64_t batch, int steps,
                                        const optimizer_config& opt, std::uint64_t seed, const batch_fn& data) {
  graph g;
  var loss = model(g, batch);
  auto tr = kernels::serial_trainer::create(g, loss, {.optimizer = opt, .seed = seed, .threads = 1});
  REQUIRE_MESSAGE(tr.ok(), tr.error().message);
  std::vector<float> out;
  for (int s = 0; s < steps; ++s) {
    for (auto& [name, t] : data(s)) (*tr)->input(name).copy_from(t);
    auto l = (*tr)->step();
    REQUIRE_MESSAGE(l.ok(), l.error().message);
    out.push_back(*l);
  }
  return out;
}

/// Rows [first, first + count) of a [B, ...] tensor.
inline tensor rows(const tensor& t, std::int64_t first, std::int64_t count) {
  return t.slice(0, first, first + count).contiguous(true);
}

inline std::vector<float> distributed_losses(const actors::model_fn& model, const planner::parallel_plan& plan,
                                             std::int64_t batch, int steps, const optimizer_config& opt,
                                             std::uint64_t seed, const batch_fn& data,
                                             const std::vector<std::size_t>& cuts = {}) {
  using namespace cohort::actors;
  auto cm = compile(model, plan, batch, cuts);
  REQUIRE_MESSAGE(cm.ok(), cm.error().message);
  kernels::set_math_threads(1);
  const int ranks = plan.ranks();
  transport::in_process_fabric fabric(ranks);
  kernels::dispatch_table table = kernels::cpu_kernels();
  add_comm_kernels(table);
  const planner::rank_layout layout(plan);
  struct slot {
    worker_place at;
    std::unique_ptr<stage_worker> worker;
    std::unique_ptr<param_shard> params;
  };
  std::vector<slot> workers;
  for (int d = 0; d < plan.dp; ++d)
    for (int s = 0; s < plan.pp; ++s)
      for (int t = 0; t < plan.tp; ++t) {
        worker_place at{d, s, t};
        int r = layout.rank_of(at);
        auto prog = cm->program(s, t);
        REQUIRE_MESSAGE(prog.ok(), prog.error().message);
        comm_context ctx{&fabric.endpoint(r), {{"tp", layout.group(r, "tp")}, {"dp", layout.group(r, "dp")}},
                         std::chrono::milliseconds(60000)};
        auto w = stage_worker::create(std::move(*prog), plan.buffer_size(s), &table, nullptr, ctx, plan.micro_batches == 1);
        REQUIRE_MESSAGE(w.ok(), w.error().message);
        REQUIRE((*w)->load_initial_parameters(*cm->serial, seed).ok());
        auto ps = std::make_unique<param_shard>(params_piece(**w, plan, d), opt);
        workers.push_back({at, std::move(*w), std::move(ps)});
      }
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    auto global = data(step);
    std::vector<result<actors::step_report>> reports(workers.size(), make_error(errc::closed, "not run"));
    std::vector<tensor> pending(workers.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < workers.size(); ++i)
      threads.emplace_back([&, i] {
        slot& sl = workers[i];
        actors::step_io io;
        io.inputs = [&](int mb) -> result<std::map<std::string, tensor>> {
          std::map<std::string, tensor> out;
          std::int64_t first = (static_cast<std::int64_t>(sl.at.dp_rank) * plan.micro_batches + mb) * cm->micro_batch;
          for (auto& [name, t] : global) out[name] = rows(t, first, cm->micro_batch);
          return out;
        };
        io.submit = [&, i](const tensor& g) {
          pending[i] = g;
          return status{};
        };
        reports[i] = run_worker_step(*sl.worker, cm->schedule[static_cast<std::size_t>(sl.at.stage)], plan, sl.at, io,
                                     static_cast<std::uint64_t>(step), std::chrono::milliseconds(60000));
      });
    for (auto& t : threads) t.join();
    for (std::size_t i = 0; i < workers.size(); ++i)  // the commit: every worker finished the step
      if (reports[i].ok()) REQUIRE(workers[i].params->update(pending[i]).ok());
    double loss = 0;
    for (auto& r : reports) {
      REQUIRE_MESSAGE(r.ok(), r.error().message);
      if (r->reports_loss) loss += r->loss_share;
    }
    losses.push_back(static_cast<float>(loss));
  }
  return losses;
}

}  // namespace cohort::test
