// The coordinator's step protocol: start, collect, commit or recover.
#include "actors/coordinator.hpp"

#include "actors/comm_kernels.hpp"
#include "actors/param_actor.hpp"
#include "kernels/threads.hpp"

namespace cohort::actors {
namespace {

using self_ptr = caf::stateful_actor<coordinator_state>*;

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void start_step(self_ptr self);

void finish(self_ptr self, const status& st) {
  auto& s = self->state;
  s.summary.seconds = since(s.run_start);
  for (auto& w : s.workers)
    if (w) self->send_exit(w, caf::exit_reason::user_shutdown);
  for (auto& p : s.params)
    if (p) self->send_exit(p, caf::exit_reason::user_shutdown);
  self->send_exit(s.data, caf::exit_reason::user_shutdown);
  if (st) s.done.deliver(s.summary);
  else s.done.deliver(caf::make_error(caf::sec::runtime_error, st.error().message));
  s.workers.clear();
  self->quit();
}

caf::actor spawn_worker(self_ptr self, int rank) {
  auto& s = self->state;
  return self->spawn<worker_actor, caf::monitored>(s.specs[static_cast<std::size_t>(rank)], s.fabric, s.generation);
}

void after_commit(self_ptr self) {
  auto& s = self->state;
  step_metrics m;
  m.step = s.step;
  m.generation = s.generation;
  m.seconds = since(s.step_start);
  for (auto& o : s.outcomes) {
    m.task_seconds.push_back(o ? o->report.seconds : planner::task_seconds{});  // zeros: a rank of another process
    if (o && o->report.reports_loss) m.loss += o->report.loss_share;
  }
  if (s.options.combine_loss) {
    auto total = s.options.combine_loss(s.step, m.loss);
    if (!total) {
      finish(self, make_error(total.error().code, "step " + std::to_string(s.step) + ": " + total.error().message));
      return;
    }
    m.loss = *total;
  }
  s.summary.losses.push_back(m.loss);
  if (s.options.on_step) s.options.on_step(m);
  ++s.step;
  start_step(self);
}

// Every worker finished the step: it is committed. Its gradients are applied by each worker
// at the start of its next step (or by the parameter actors on recovery and at the end).
void commit(self_ptr self) {
  self->state.committed = self->state.step;
  after_commit(self);
}

void recover(self_ptr self) {
  auto& s = self->state;
  std::string first;
  for (auto& o : s.outcomes)
    if (o && !o->failure.empty() && first.empty()) first = "rank " + std::to_string(o->rank) + ": " + o->failure;
  if (s.options.fabric) {  // across processes: detection only, recovery is not built yet
    const std::string why = s.fabric->closed_reason();
    finish(self, make_error(errc::closed, "step " + std::to_string(s.step) + " failed: " + first +
                                              (why.empty() || first.find(why) != std::string::npos ? "" : " (" + why + ")")));
    return;
  }
  if (++s.summary.restarts > s.options.max_restarts) {
    finish(self, make_error(errc::closed, "step " + std::to_string(s.step) + " failed " + std::to_string(s.summary.restarts) +
                                              " times (max-restarts " + std::to_string(s.options.max_restarts) + "); last: " + first));
    return;
  }
  ++s.generation;
  s.fabric = std::make_shared<transport::in_process_fabric>(static_cast<int>(s.workers.size()));
  auto left = std::make_shared<std::size_t>(s.params.size());
  auto resume = [=] {
    if (--*left > 0) return;
    auto& st = self->state;
    st.recovering = false;
    for (auto& f : st.summary.failures)
      if (f.recover_seconds == 0) f.recover_seconds = since(st.detected_at);
    start_step(self);
  };
  for (std::size_t r = 0; r < s.workers.size(); ++r) {
    if (s.dead[r]) {
      s.workers[r] = spawn_worker(self, static_cast<int>(r));  // refills from its parameter actor
      s.dead[r] = false;
    } else {
      ++*left;
      self->request(s.workers[r], s.options.timeout, reset_atom::value, s.generation, s.fabric)
          .then([=](ok_atom) { resume(); },
                [=](caf::error& e) { finish(self, make_error(errc::closed, "reset of worker " + std::to_string(r) + ": " + to_string(e))); });
    }
  }
  for (auto& p : s.params)
    self->request(p, s.options.timeout, rollback_atom::value, s.generation, s.committed)
        .then([=](ok_atom) { resume(); },
              [=](caf::error& e) { finish(self, make_error(errc::closed, "rollback: " + to_string(e))); });
}

void on_outcome(self_ptr self, std::size_t rank, step_outcome o) {
  auto& s = self->state;
  if (s.outcomes[rank]) return;  // a dead worker's late error reply after its down_msg
  if (!o.failure.empty() && !s.recovering) {
    s.recovering = true;
    s.detected_at = std::chrono::steady_clock::now();
    s.fabric->close("rank " + std::to_string(rank) + " failed");  // release the workers waiting on it
  }
  s.outcomes[rank] = std::move(o);
  if (--s.outstanding > 0) return;
  if (s.recovering) recover(self);
  else commit(self);
}

// After the last step: the trained parameters, from the parameter actors' pieces.
void collect_and_finish(self_ptr self) {
  auto& s = self->state;
  if (!s.options.collect_parameters) {
    finish(self, {});
    return;
  }
  auto pieces = std::make_shared<std::vector<tensor>>(s.params.size());
  auto left = std::make_shared<std::size_t>(0);
  for (auto& p : s.params) *left += p ? 1 : 0;
  auto assemble = [=] {
    auto& st = self->state;
    if (st.options.gather_pieces) {
      auto all = st.options.gather_pieces(std::move(*pieces));
      if (!all) return finish(self, make_error(all.error().code, "collecting parameters: " + all.error().message));
      if (all->empty()) return finish(self, {});  // another process assembles the model
      *pieces = std::move(*all);
    }
    auto full = assemble_parameters(*st.model, *pieces);
    if (!full) return finish(self, full.error());
    st.summary.parameters = std::move(*full);
    finish(self, {});
  };
  for (std::size_t r = 0; r < s.params.size(); ++r) {
    if (!s.params[r]) continue;
    self->request(s.params[r], s.options.timeout, fetch_atom::value, s.committed)
        .then(
            [=](tensor& piece) {
              (*pieces)[r] = std::move(piece);
              if (--*left == 0) assemble();
            },
            [=](caf::error& e) { finish(self, make_error(errc::closed, "collecting parameters: " + to_string(e))); });
  }
}

void start_step(self_ptr self) {
  auto& s = self->state;
  if (s.step >= s.options.steps) {
    collect_and_finish(self);
    return;
  }
  s.outcomes.assign(s.workers.size(), std::nullopt);
  s.outstanding = 0;
  for (auto& w : s.workers) s.outstanding += w ? 1 : 0;
  s.step_start = std::chrono::steady_clock::now();
  const std::int64_t gen = s.generation, step = s.step;
  const auto step_timeout = s.options.timeout * 4;
  for (std::size_t r = 0; r < s.workers.size(); ++r) {
    if (!s.workers[r]) continue;  // a rank of another process
    self->request(s.workers[r], step_timeout, step_atom::value, gen, step, s.committed)
        .then(
            [=](done_atom, std::int64_t g, std::int64_t k, step_outcome& o) {
              if (g == self->state.generation && k == self->state.step) on_outcome(self, r, std::move(o));
            },
            [=](caf::error& e) {
              if (gen != self->state.generation || step != self->state.step) return;
              step_outcome o;
              o.rank = static_cast<int>(r);
              o.failure = to_string(e);
              on_outcome(self, r, std::move(o));
            });
  }
}

void setup(self_ptr self, batch_fn data) {
  auto& s = self->state;
  const auto& plan = s.model->plan;
  const int ranks = plan.ranks();
  s.fabric = s.options.fabric ? s.options.fabric : std::make_shared<transport::in_process_fabric>(ranks);
  const int local = s.fabric->local_ranks();
  const int kernel_threads = std::max(1, s.options.threads / local);
  const bool spare_core = kernel_threads * local < kernels::available_cores();
  s.data = self->spawn(data_actor, std::move(data), plan.dp, plan.micro_batches, s.model->micro_batch, spare_core);
  kernels::dispatch_table table = kernels::cpu_kernels();
  add_comm_kernels(table);
  s.dead.assign(static_cast<std::size_t>(ranks), false);
  for (int r = 0; r < ranks; ++r) {
    auto spec = std::make_shared<worker_spec>();
    spec->model = s.model;
    spec->rank = r;
    spec->at = planner::rank_layout(plan).place_of(r);
    spec->seed = s.options.seed;
    spec->kernel_threads = kernel_threads;
    spec->timeout = s.options.timeout;
    spec->table = table;
    spec->coordinator = caf::actor_cast<caf::actor>(self);
    spec->data = s.data;
    s.params.push_back(s.fabric->is_local(r) ? self->spawn(param_actor, s.options.optimizer) : caf::actor{});
    spec->params = s.params.back();
    spec->inject = s.options.inject;
    s.specs.push_back(spec);
  }
  for (int r = 0; r < ranks; ++r) s.workers.push_back(s.fabric->is_local(r) ? spawn_worker(self, r) : caf::actor{});
}

}  // namespace

caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, std::shared_ptr<const compiled_model> model,
                          run_options options, batch_fn data) {
  self->state.model = std::move(model);
  self->state.options = std::move(options);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& s = self->state;
    for (std::size_t r = 0; r < s.workers.size(); ++r) {
      if (dm.source != s.workers[r].address()) continue;
      s.dead[r] = true;
      failure_event f;
      f.rank = static_cast<int>(r);
      f.step = s.step;
      f.reason = to_string(dm.reason);
      f.detect_seconds = since(s.step_start);
      s.summary.failures.push_back(f);
      step_outcome o;
      o.rank = static_cast<int>(r);
      o.failure = "worker died: " + f.reason;
      on_outcome(self, r, std::move(o));
      return;
    }
  });
  return {
      [=](run_atom) {
        auto& s = self->state;
        s.done = self->make_response_promise();
        s.run_start = std::chrono::steady_clock::now();
        setup(self, data);
        start_step(self);
        return s.done;
      },
  };
}

}  // namespace cohort::actors
