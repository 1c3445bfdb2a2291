// The worker actor's thread: start, then steps until the coordinator stops it.
#include "actors/worker_actor.hpp"

#include <time.h>

#include <chrono>
#include <cstdint>

#include <optional>

#include <stdexcept>
#include "actors/replicas.hpp"
#include "kernels/threads.hpp"

namespace cohort::actors {
worker_actor::worker_actor(caf::actor_config& cfg, std::shared_ptr<const worker_spec> spec, fabric_ptr fabric,
                           std::int64_t generation)
    : caf::blocking_actor(cfg), spec_(std::move(spec)), fabric_(std::move(fabric)), generation_(generation) {}

status worker_actor::start() {
  const worker_spec& s = *spec_;
  if (s.core >= 0) kernels::pin_current_thread(s.core);  // a hint: unbound if refused
  const auto& plan = s.model->plan;
  auto prog = s.model->program(s.at.stage, s.at.tp_rank);
  if (!prog) return prog.error();
  // a batch that splits unevenly: the smaller shares' program too, where this replica has one
  const planner::batch_split split = s.model->split();
  std::optional<stage_program> smaller;
  const bool larger_used = split.uses(s.at.dp_rank, split.largest());
  if (!split.even() && split.uses(s.at.dp_rank, split.smallest())) {
    auto small = s.model->program(s.at.stage, s.at.tp_rank, split.smallest());
    if (!small) return small.error();
    smaller = std::move(*small);
  }
  const planner::rank_layout layout(plan);
  comm_context ctx{
      &fabric_->endpoint(s.rank), {{"tp", layout.group(s.rank, "tp")}, {"dp", layout.group(s.rank, "dp")}}, s.timeout};
  if (s.kernel_threads > 1) pool_ = std::make_unique<kernels::thread_pool>(s.kernel_threads);
  const int slots = planner::slots_needed(s.model->schedule.at(static_cast<std::size_t>(s.at.stage)));
  auto w = stage_worker::create(std::move(*prog), slots, &s.table, pool_.get(), ctx, plan.micro_batches == 1,
                                std::move(smaller), larger_used);
  if (!w) return w.error();
  worker_ = std::move(*w);
  if (!s.restore)
    if (auto st = worker_->load_initial_parameters(*s.model->serial, s.seed); !st) return st;
  // The parameter actor adopts this storage; after a failure it refills it first.
  status attached;
  request(s.params, s.timeout, attach_atom::value, params_piece(*worker_, plan, s.at.dp_rank))
      .receive([&](piece_ptr& p) { piece_ = std::move(p); },
               [&](caf::error& e) { attached = make_error(errc::closed, "attach: " + to_string(e)); });
  return attached;
}

step_outcome worker_actor::run_step(std::int64_t step, std::int64_t committed) {
  const worker_spec& s = *spec_;
  step_outcome out;
  out.rank = s.rank;
  auto failed = [&](const error& e) {
    out.failure = e.message;
    out.code = e.code;
    return out;
  };
  // the committed step's optimizer update, on this thread: part of the rank's own work (a
  // slower CPU takes longer over it too; the test hook's slow_factor)
  const double update_cpu_at = thread_cpu_seconds();
  const auto update_at = std::chrono::steady_clock::now();
  if (auto st = piece_->apply_committed(committed); !st) return failed(st.error());
  const double update_cpu = burn_slower(thread_cpu_seconds() - update_cpu_at, s.slow_factor);
  const double update_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - update_at).count();
  // buddy copies: the committed step into the copies kept here; this piece's seed, once
  transport::channel& ch = *worker_->comm().channel;
  for (const auto& [from, copy] : s.copies)
    if (copy->holds_values())
      if (auto st = copy->apply_committed(committed); !st) return failed(st.error());
  if (s.buddy >= 0 && !seed_sent_) {
    auto state = piece_->snapshot();
    if (!state) return failed(state.error());
    if (auto st = send_seed(ch, s.buddy, static_cast<std::uint64_t>(step), *state, s.timeout); !st)
      return failed(
          make_error(st.error().code, "buddy copy to rank " + std::to_string(s.buddy) + ": " + st.error().message));
    seed_sent_ = true;
  }
  // geo mode: the kept rows' deltas are exchanged between steps, the step trains locally or gathers
  const auto& plan = s.model->plan;
  const bool geo = s.exchange.geo() && !worker_->sparse_tables().empty() && plan.dp > 1 && !plan.shard_params;
  std::int64_t geo_bytes = 0;
  double geo_s = 0;
  if (geo && s.exchange.exchanges_before(step)) {
    const auto start = std::chrono::steady_clock::now();
    auto bytes = exchange_local_rows(
        *piece_, sparse_table_grads(*worker_, 0), *worker_->comm().channel, worker_->comm().groups.at("dp"),
        static_cast<std::uint64_t>(step), s.timeout, s.exchange.geo_deltas,
        s.exchange.exit_step == step && s.exchange.exit_rank == s.rank && generation_ == 0);  // (once)
    if (!bytes) {
      out.failure = "geo exchange before step " + std::to_string(step) + ": " + bytes.error().message;
      out.code = bytes.error().code;
      return out;
    }
    geo_bytes = *bytes;
    geo_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  step_io io;
  io.local_tables = geo && !s.exchange.gathers(step);
  io.table_delay = s.exchange.table_delay();
  const std::int64_t version = worker_->sparse_tables().empty() ? -1 : piece_->tables_through();
  io.trace = s.trace.covers(step);
  // the replica's rows for the whole step, asked for once at its first micro-batch
  std::optional<std::map<std::string, tensor>> rows;
  io.inputs = [&](int mb) -> result<std::map<std::string, tensor>> {
    if (!rows) {
      status st = make_error(errc::timeout, "data actor did not answer");
      request(s.data, s.timeout, batch_atom::value, step, s.at.dp_rank)
          .receive([&](micro_batch& m) { rows = std::move(m.inputs), st = {}; },
                   [&](caf::error& e) {
                     const error d = from_caf(e);
                     st = make_error(d.code, "data: " + d.message);
                   });
      if (!st) return st.error();
    }
    const planner::batch_split split = s.model->split();
    const std::int64_t first = split.first_in_replica(s.at.dp_rank, mb);
    std::map<std::string, tensor> out;
    for (const auto& [name, t] : *rows) out[name] = t.slice(0, first, first + split.rows(s.at.dp_rank, mb));
    return out;
  };
  io.submit = [&](const piece_gradient& piece) -> status {
    status st;
    request(s.params, s.timeout, update_atom::value, generation_, step, piece)
        .receive([&](ok_atom) {}, [&](caf::error& e) { st = make_error(errc::closed, "parameters: " + to_string(e)); });
    if (!st) return st;
    // the gradient to this piece's copy, then the copies kept here take theirs: the step is
    // done here only once they hold it (a committed step is in every copy)
    if (s.buddy >= 0)
      if (st = send_gradient(ch, s.buddy, static_cast<std::uint64_t>(step), piece, s.timeout); !st) return st;
    return keep_copies(step);
  };
  if (s.inject.armed() && s.inject.rank == s.rank && s.inject.step == step && generation_ == 0)
    io.before_task = [&](const task& t, std::size_t index) {
      if (index == s.inject.task_index)
        throw std::runtime_error("injected failure in rank " + std::to_string(s.rank) + " at step " +
                                 std::to_string(step) + ", task " + to_string(t));
    };
  io.slow_factor = s.slow_factor;
  auto r = run_worker_step(*worker_, s.model->schedule[static_cast<std::size_t>(s.at.stage)], s.model->plan,
                           s.model->batch, s.at, io, static_cast<std::uint64_t>(step), s.timeout);
  if (r)
    r->alone_s =
        s.kernel_threads == 1 ? r->cpu_s + update_cpu : r->seconds.forward_s + r->seconds.backward_s + update_wall;
  if (r) {
    out.report = std::move(*r);
    out.report.sparse_bytes += geo_bytes;
    out.report.table_version = version;
    out.report.seconds.update_s += geo_s;
  } else {
    out.failure = r.error().message;
    out.code = r.error().code;
  }
  return out;
}

status worker_actor::keep_copies(std::int64_t step) {
  const worker_spec& s = *spec_;
  transport::channel& ch = *worker_->comm().channel;
  copy_scratch_.resize(s.copies.size());
  for (std::size_t i = 0; i < s.copies.size(); ++i) {
    const auto& [from, copy] = s.copies[i];
    auto fail = [&, from = from](const error& e) {
      return make_error(e.code, "buddy copy of rank " + std::to_string(from) + ": " + e.message);
    };
    if (!copy->holds_values()) {  // the plan's first step: the piece as it stood before it
      auto seed = receive_seed(ch, from, static_cast<std::uint64_t>(step), s.slots, s.timeout);
      if (!seed) return fail(seed.error());
      copy->seed(std::move(*seed));
    }
    auto grad = receive_gradient(ch, from, static_cast<std::uint64_t>(step), copy->size(), copy_scratch_[i], s.timeout);
    if (!grad) return fail(grad.error());
    if (auto st = copy->submit(generation_, step, std::move(*grad)); !st) return fail(st.error());
  }
  return {};
}

void worker_actor::act() {
  monitor(spec_->coordinator);
  try {
    if (auto st = start(); !st) {
      fail_state(
          to_caf(make_error(st.error().code, "worker " + std::to_string(spec_->rank) + ": " + st.error().message)));
      return;
    }
    bool running = true;
    receive_while(running)(
        [&](step_atom, std::int64_t gen, std::int64_t step,
            std::int64_t committed) -> caf::result<done_atom, std::int64_t, std::int64_t, step_outcome> {
          if (gen != generation_)
            return caf::make_error(caf::sec::runtime_error, "stale generation " + std::to_string(gen));
          return {done_atom::value, gen, step, run_step(step, committed)};
        },
        [&](reset_atom, std::int64_t gen, fabric_ptr& fabric) {
          generation_ = gen;
          fabric_ = fabric;
          worker_->comm().channel = &fabric_->endpoint(spec_->rank);
          worker_->comm().calls = 0;
          return ok_atom::value;
        },
        [&](caf::down_msg&) { running = false; },
        [&](caf::exit_msg& em) {
          running = false;
          if (em.reason && em.reason != caf::exit_reason::user_shutdown) fail_state(em.reason);
        });
  } catch (const std::exception& e) {
    fail_state(caf::make_error(caf::sec::runtime_error, std::string(e.what())));
  }
}

}  // namespace cohort::actors
