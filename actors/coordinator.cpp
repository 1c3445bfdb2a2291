// The coordinator actor: carries out the step protocol's actions — steps, recovery, the final
// collection (plan transitions: coordinator_transition.cpp) — with asynchronous requests only.
#include "actors/coordinator.hpp"

#include <algorithm>
#include <cstdio>

#include <variant>

#include "actors/comm_kernels.hpp"
#include "actors/control_proxy.hpp"
#include "actors/coordinator_parts.hpp"
#include "actors/hetero_placement.hpp"
#include "actors/param_actor.hpp"
#include "actors/replicas.hpp"
#include "kernels/threads.hpp"
#include "planner/rank_layout.hpp"
#include "transport/in_process.hpp"

namespace cohort::actors {
namespace coordination {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string fabric_reason(self_ptr self) { return self->state.fabric ? self->state.fabric->closed_reason() : ""; }

bool is_local(self_ptr self, int rank) {
  const auto& s = self->state;
  return !s.options.job || s.owner[static_cast<std::size_t>(rank)] == s.options.job->process;
}

std::vector<bool> local_flags(self_ptr self) {
  std::vector<bool> out;
  for (int r = 0; r < self->state.model->plan.ranks(); ++r) out.push_back(is_local(self, r));
  return out;
}

// Runs `call` on the control proxy's thread; `then` gets control back once it returned.
void on_proxy(self_ptr self, std::function<void()> call, std::function<void()> then) {
  auto& s = self->state;
  self->request(s.proxy, s.options.timeout * 4, call_atom::value, blocking_call{std::move(call)})
      .then([then](ok_atom) { then(); },
            [self](caf::error& e) {
              execute(self,
                      self->state.protocol->on_error(make_error(errc::timeout, "control proxy: " + to_string(e))));
            });
}

// --- the actors of one plan ------------------------------------------------------------------

worker_hdl spawn_worker(self_ptr self, int rank) {
  auto& s = self->state;
  return caf::actor_cast<worker_hdl>(self->spawn<worker_actor, caf::monitored>(s.specs[static_cast<std::size_t>(rank)],
                                                                               s.fabric, s.protocol->generation()));
}

// This process's data actor, parameter actors (fresh, or holding a transition's states) and
// workers for s.model over s.fabric.
std::vector<int> owners_of(self_ptr self, const planner::parallel_plan& plan) {
  auto& s = self->state;
  if (!s.options.job) return std::vector<int>(static_cast<std::size_t>(plan.ranks()), 0);
  if (static_cast<int>(s.placement.size()) == plan.ranks()) return s.placement;  // a migration's
  return planner::rank_layout::placed(plan.ranks(), s.live);
}

void spawn_plan(self_ptr self, std::int64_t from_step, std::vector<piece_state>* states,
                std::vector<param_actor_hdl>* kept) {
  auto& s = self->state;
  const auto& plan = s.model->plan;
  const int ranks = plan.ranks();
  const planner::rank_layout layout(plan);
  s.owner = owners_of(self, plan);
  int local = 0;
  for (int r = 0; r < ranks; ++r) local += is_local(self, r) ? 1 : 0;
  const int kernel_threads = std::max(1, s.options.threads / std::max(1, local));
  kernels::set_math_threads(kernel_threads);
  const int cores = kernels::available_cores();
  const bool spare_core = kernel_threads * local < cores;
  // Tensor-parallel peers wait on each other inside every operation: where the process's
  // workers outnumber its cores, two peers sharing a core would hand it back and forth at
  // each collective, so each peer gets its own core (the rest of a group's time is shared).
  const bool bind_tp_peers = plan.tp > 1 && plan.tp <= cores && kernel_threads == 1 && local > cores;
  // the heterogeneous pipeline: its two stages on disjoint halves of the cores (hetero_placement.hpp)
  const int computes_on = std::min(cores, s.options.threads);
  const std::vector<int> hetero_core = s.options.exchange.hetero()
                                           ? hetero_cores(plan, local_flags(self), computes_on)
                                           : std::vector<int>(static_cast<std::size_t>(ranks), -1);
  if (const std::string bound = describe_hetero_cores(plan, hetero_core); !bound.empty())
    std::fprintf(stderr, "hetero: %s%s (of the %d it computes on)\n",
                 s.options.job ? ("process " + std::to_string(s.options.job->process) + ": ").c_str() : "",
                 bound.c_str(), computes_on);
  // one data actor for the whole run: a new plan only cuts the same stream another way (and
  // the app's batch function is never called from two actors at once)
  const std::int64_t first_sample =
      s.cursor.empty() ? (s.options.first_sample >= 0 ? s.options.first_sample : from_step * s.options.batch)
                       : s.cursor.first_sample(from_step);
  s.cursor.begin({from_step, first_sample, s.model->batch});
  const data_split split{plan.dp,    plan.micro_batches, s.model->batch, s.options.batch,
                         spare_core, from_step,          first_sample};
  if (s.data)
    self->send(s.data, configure_atom::value, split);
  else
    s.data = self->spawn(data_actor, s.data_source, split);
  if (s.options.rule().scales())  // the learning rate follows the batch (kept actors: none, export_state)
    s.options.optimizer =
        with_learning_rate(s.options.optimizer, static_cast<float>(s.base_lr * s.options.rule().lr_factor(plan.dp)));
  kernels::dispatch_table table = kernels::cpu_kernels();
  add_comm_kernels(table);
  s.params.assign(static_cast<std::size_t>(ranks), param_actor_hdl{});
  s.workers.assign(static_cast<std::size_t>(ranks), worker_hdl{});
  s.specs.clear();
  // buddy copies: where a piece has no data-parallel replica on another process
  const bool copies =
      s.options.replicas && s.options.job && !s.options.exchange.geo() && s.options.exchange.table_delay() == 0;
  s.buddies = copies ? buddy_ranks(plan, s.owner) : std::vector<int>(static_cast<std::size_t>(ranks), -1);
  s.copies.assign(static_cast<std::size_t>(ranks), piece_ptr{});
  const std::int64_t generation = s.protocol ? s.protocol->generation() : 0;
  for (int r = 0; r < ranks; ++r) {
    auto spec = std::make_shared<worker_spec>();
    spec->model = s.model;
    spec->rank = r;
    spec->at = layout.place_of(r);
    spec->seed = s.options.seed;
    spec->kernel_threads = kernel_threads;
    spec->core = bind_tp_peers ? spec->at.tp_rank : hetero_core[static_cast<std::size_t>(r)];
    spec->timeout = s.options.timeout;
    spec->table = table;
    spec->coordinator = caf::actor_cast<caf::actor>(self);
    spec->data = s.data;
    spec->restore = states != nullptr;
    if (kept && (*kept)[static_cast<std::size_t>(r)]) {
      s.params[static_cast<std::size_t>(r)] = std::move((*kept)[static_cast<std::size_t>(r)]);
    } else if (is_local(self, r)) {
      std::optional<piece_state> initial;
      if (states) initial = std::move((*states)[static_cast<std::size_t>(r)]);
      s.params[static_cast<std::size_t>(r)] =
          self->spawn(param_actor, s.options.optimizer, std::move(initial), generation);
    }
    spec->params = s.params[static_cast<std::size_t>(r)];
    spec->buddy = s.buddies[static_cast<std::size_t>(r)];
    spec->slots = static_cast<std::size_t>(state_slots(s.options.optimizer));
    if (is_local(self, r))
      for (int from : copies_kept_by(s.buddies, r)) {
        auto copy = std::make_shared<parameter_piece>(s.options.optimizer, std::nullopt, generation);
        s.copies[static_cast<std::size_t>(from)] = copy;
        spec->copies.emplace_back(from, std::move(copy));
      }
    spec->inject = s.options.inject;
    spec->slow_factor = s.options.slow_factor;
    spec->exchange = s.options.exchange;
    spec->trace = s.options.trace;
    s.specs.push_back(spec);
  }
  for (int r = 0; r < ranks; ++r)
    if (is_local(self, r)) s.workers[static_cast<std::size_t>(r)] = spawn_worker(self, r);
}

// Stops this plan's workers and parameter actors (a transition's old plan, or the end of the run).
void retire_plan(self_ptr self) {
  auto& s = self->state;
  auto workers = std::move(s.workers);
  auto params = std::move(s.params);
  s.workers.clear(), s.params.clear();
  for (auto& w : workers)
    if (w) self->send_exit(w, caf::exit_reason::user_shutdown);
  for (auto& p : params)
    if (p) self->send_exit(p, caf::exit_reason::user_shutdown);
}

// --- actions ---------------------------------------------------------------------------------

void start_step(self_ptr self, const start_step_action& a) {
  auto& s = self->state;
  if (s.options.on_step_start) s.options.on_step_start(a.step);
  const auto step_timeout = s.options.timeout * 4;
  for (std::size_t r = 0; r < s.workers.size(); ++r) {
    if (!s.workers[r]) continue;  // a rank of another process
    const int rank = static_cast<int>(r);
    self->request(s.workers[r], step_timeout, step_atom::value, a.generation, a.step, a.committed)
        .then(
            [=](done_atom, std::int64_t g, std::int64_t k, step_outcome& o) {
              auto& opts = self->state.options;
              if (opts.on_spans && !o.report.spans.empty())
                opts.on_spans(rank, planner::rank_layout(self->state.model->plan).place_of(rank), k, o.report.spans);
              execute(self, self->state.protocol->on_outcome(g, k, rank, std::move(o), fabric_reason(self),
                                                             clock_type::now()));
            },
            [=](caf::error& e) {
              step_outcome o;
              o.rank = rank;
              o.failure = to_string(e);
              execute(self, self->state.protocol->on_outcome(a.generation, a.step, rank, std::move(o),
                                                             fabric_reason(self), clock_type::now()));
            });
  }
}

void combine_loss(self_ptr self, const combine_loss_action& a) {
  auto& s = self->state;
  auto total = std::make_shared<result<step_sum>>(make_error(errc::closed, "not combined"));
  const auto& job = *s.options.job;
  auto sum = job.sum_loss;
  // a node that asks to leave (SIGTERM, --elastic.leave-after) says so in the step's sum;
  // process 0 how many processes wait to join (not again the same number it chose not to grow
  // for) and the straggler it found in the sums before
  step_share mine;
  mine.loss = a.local_loss;
  mine.leaving = job.wants_to_leave && job.wants_to_leave(a.step);
  // the seconds one of its ranks takes alone here (as measured: ranks sharing the cores do not
  // lengthen them; the best move counts the sharing)
  mine.per_rank_s = a.busiest_s;
  if (job.leads() && s.undo_due && !s.undoing) {  // a straggler's move made the step slower: undone
    mine.straggler = s.last_move.from;
    s.undoing = true;
  } else if (job.leads() && s.stragglers && !s.checking) {
    mine.straggler = s.stragglers->straggler();
    if (mine.straggler >= 0) {  // said once; counted again after the move, which the window's medians predict
      s.straggler_pace = s.stragglers->pace();
      s.stragglers->reset();
    }
    // a straggler none of whose ranks can move to advantage (one rank left) is said once, not at
    // every window: the job goes on as it is until its placement changes
    if (mine.straggler >= 0 && !best_move(s.straggler_pace, s.owner, mine.straggler, s.options.threads)) {
      if (s.unrelieved != mine.straggler)
        std::fprintf(stderr,
                     "\njob: process %d is a straggler (%.4g s per rank, slower than its peers); no move of "
                     "one of its ranks shortens the step\n",
                     mine.straggler, s.straggler_pace[static_cast<std::size_t>(mine.straggler)]);
      s.unrelieved = mine.straggler;
      mine.straggler = -1;
    }
  }
  auto waiting = job.joiners_waiting;
  const int refused = s.refused_joiners;
  const std::uint64_t epoch = s.membership_epoch;
  on_proxy(
      self,
      [=]() mutable {
        mine.joining = waiting ? waiting(a.step) : 0;
        if (mine.joining == refused) mine.joining = 0;
        *total = sum(a.step, mine, epoch);
      },
      [=] {
        auto& st = self->state;
        auto& protocol = *st.protocol;
        if (!*total) return execute(self, protocol.on_loss(a.step, (*total).error(), clock_type::now()));
        protocol.leave_after_commit((*total)->leaving);
        protocol.join_after_commit((*total)->joining);
        protocol.migrate_after_commit((*total)->straggler);
        st.per_rank_s = (*total)->per_rank_s;
        if (st.stragglers) st.stragglers->observe(st.per_rank_s, st.owner);
        execute(self, protocol.on_loss(a.step, (*total)->loss, clock_type::now()));
      });
}

void recover(self_ptr self, const recover_action& a) {
  auto& s = self->state;
  s.fabric = std::make_shared<transport::in_process_fabric>(s.model->plan.ranks());
  auto left = std::make_shared<std::size_t>(a.reset.size());
  for (auto& p : s.params) *left += p ? 1 : 0;
  auto resume = [=] {
    if (--*left == 0) execute(self, self->state.protocol->on_recovered(clock_type::now()));
  };
  auto failed = [=](const std::string& what) {
    return [=](caf::error& e) {
      execute(self, self->state.protocol->on_error(make_error(errc::closed, what + ": " + to_string(e))));
    };
  };
  for (int r : a.respawn)
    s.workers[static_cast<std::size_t>(r)] = spawn_worker(self, r);  // refills from its parameter actor
  for (int r : a.reset)
    self->request(s.workers[static_cast<std::size_t>(r)], s.options.timeout, reset_atom::value, a.generation, s.fabric)
        .then([=](ok_atom) { resume(); }, failed("reset of worker " + std::to_string(r)));
  for (auto& p : s.params)
    if (p)
      self->request(p, s.options.timeout, rollback_atom::value, a.generation, a.committed)
          .then([=](ok_atom) { resume(); }, failed("rollback"));
  if (*left == 0) execute(self, s.protocol->on_recovered(clock_type::now()));
}

// The planner actor's refit for the summary, then the end of the run.
void finish_collection(self_ptr self) {
  auto& s = self->state;
  if (s.writes_in_flight > 0) {
    s.collection_waits = true;  // the last write's answer comes back here
    return;
  }
  if (!s.options.refit) return execute(self, s.protocol->on_collected());
  self->request(s.planner, s.options.timeout, refit_atom::value)
      .then(
          [=](std::string& text) {
            self->state.summary.prediction = nlohmann::json::parse(text, nullptr, false);
            execute(self, self->state.protocol->on_collected());
          },
          [=](caf::error& e) { execute(self, self->state.protocol->on_error(from_caf(e))); });
}

// Every rank's committed piece (the live storage: nothing trains meanwhile) on the process that
// assembles the model — `then` gets them there, an empty vector elsewhere.
void gather_parameters(self_ptr self, std::int64_t committed, std::function<void(std::vector<tensor>)> assemble) {
  auto& s = self->state;
  auto pieces = std::make_shared<std::vector<tensor>>(s.params.size());
  auto left = std::make_shared<std::size_t>(0);
  for (auto& p : s.params) *left += p ? 1 : 0;
  auto fail = [=](const error& e) { execute(self, self->state.protocol->on_error(e)); };
  auto gathered = [=] {
    auto& st = self->state;
    if (!st.options.job) return assemble(std::move(*pieces));
    auto all = std::make_shared<result<std::vector<tensor>>>(make_error(errc::closed, "not gathered"));
    auto gather = st.options.job->gather_pieces;
    auto owner = st.owner;
    on_proxy(
        self, [=] { *all = gather(std::move(*pieces), owner); },
        [=] {
          if (!*all) return fail(make_error((*all).error().code, "collecting parameters: " + (*all).error().message));
          assemble(std::move(**all));
        });
  };
  if (*left == 0) return gathered();
  for (std::size_t r = 0; r < s.params.size(); ++r) {
    if (!s.params[r]) continue;
    self->request(s.params[r], s.options.timeout, fetch_atom::value, committed)
        .then(
            [=](tensor& piece) {
              (*pieces)[r] = std::move(piece);
              if (--*left == 0) gathered();
            },
            [=](caf::error& e) { fail(make_error(errc::closed, "collecting parameters: " + to_string(e))); });
  }
}

void collect(self_ptr self, const collect_action& a) {
  auto& s = self->state;
  // a recovery at the last step boundary: no step left to re-plan for
  settle_recovery(self, planner::describe(s.model->plan), "none: no step left");
  if (!s.options.collect_parameters) return finish_collection(self);
  gather_parameters(self, a.committed, [=](std::vector<tensor> all) {
    auto& st = self->state;
    auto fail = [=](const error& e) { execute(self, self->state.protocol->on_error(e)); };
    if (all.empty()) return finish_collection(self);  // another process assembles the model
    if (st.options.exchange.geo())                    // the replicas' tables agree again after the last step
      if (auto agree = replicas_agree(st.model->plan, all); !agree) return fail(agree.error());
    auto full = assemble_parameters(*st.model, all);
    if (!full) return fail(full.error());
    st.summary.parameters = std::move(*full);
    finish_collection(self);
  });
}

// --eval.every: the committed parameters assembled where the model is, evaluated there on the
// control proxy's thread (a blocking computation, never the coordinator's), then the next step.
void evaluate(self_ptr self, const evaluate_action& a) {
  gather_parameters(self, a.committed, [=](std::vector<tensor> all) {
    auto& st = self->state;
    auto fail = [=](const error& e) { execute(self, self->state.protocol->on_error(e)); };
    // another process evaluates (every process takes part in the gather)
    if (all.empty() || !st.options.on_evaluate) return execute(self, st.protocol->on_evaluated(clock_type::now()));
    auto full = assemble_parameters(*st.model, all);
    if (!full) return fail(full.error());
    auto store = std::make_shared<parameter_store>(std::move(*full));
    auto done = std::make_shared<status>();
    auto fn = st.options.on_evaluate;
    on_proxy(
        self, [=] { *done = fn(a.steps_done, *store); },
        [=] {
          if (!*done) return fail(done->error());
          execute(self, self->state.protocol->on_evaluated(clock_type::now()));
        });
  });
}

void finish(self_ptr self, const finish_action& a) {
  auto& s = self->state;
  s.summary.seconds = since(s.run_start);
  s.summary.losses = s.protocol->losses();
  s.summary.failures = s.protocol->failures();
  s.summary.restarts = s.protocol->restarts();
  retire_plan(self);
  if (s.data) self->send_exit(s.data, caf::exit_reason::user_shutdown);
  if (s.planner) self->send_exit(s.planner, caf::exit_reason::user_shutdown);
  if (s.proxy) self->send_exit(s.proxy, caf::exit_reason::user_shutdown);
  s.writes_cancelled->store(true);  // a write still waiting for another process gives up
  if (s.writer) self->send_exit(s.writer, caf::exit_reason::user_shutdown);
  if (a.outcome)
    s.done.deliver(s.summary);
  else
    s.done.deliver(to_caf(a.outcome.error()));
  self->quit();
}

void execute(self_ptr self, actions todo) {
  for (auto& action : todo) {
    if (self->state.protocol->finished() && !std::holds_alternative<finish_action>(action)) continue;
    std::visit(
        [&](auto& a) {
          using A = std::decay_t<decltype(a)>;
          auto& s = self->state;
          if constexpr (std::is_same_v<A, start_step_action>)
            start_step(self, a);
          else if constexpr (std::is_same_v<A, close_fabric_action>)
            s.fabric->close(a.reason);
          else if constexpr (std::is_same_v<A, combine_loss_action>)
            combine_loss(self, a);
          else if constexpr (std::is_same_v<A, report_step_action>) {
            if (s.options.refit) self->send(s.planner, observe_atom::value, a.metrics);
            s.summary.sparse_bytes += a.metrics.sparse_bytes;
            for (std::int64_t v : a.metrics.table_versions)
              if (v >= 0) s.summary.max_table_staleness = std::max(s.summary.max_table_staleness, a.metrics.step - v);
            if (s.options.on_step) {
              step_metrics m = a.metrics;  // with the step's batch and learning rate (scale: they change)
              m.rows = s.cursor.at(m.step).rows;
              m.lr = s.base_lr * (s.options.rule().scales() ? static_cast<double>(m.rows) / s.options.batch : 1.0);
              s.options.on_step(m);
            }
            s.recent_step_s.push_back(a.metrics.seconds);
            if (s.recent_step_s.size() > move_check::steps) s.recent_step_s.pop_front();
            if (s.checking) {  // a straggler's move: did its prediction hold?
              s.checking->after_s.push_back(a.metrics.seconds);
              if (s.checking->after_s.size() >= move_check::steps) {
                s.undo_due = s.checking->made_it_worse();
                if (!s.undo_due) s.checking.reset();
              }
            }
          } else if constexpr (std::is_same_v<A, recover_action>)
            recover(self, a);
          else if constexpr (std::is_same_v<A, rejoin_action>)
            rejoin(self, a);
          else if constexpr (std::is_same_v<A, transition_action>)
            transition(self, a);
          else if constexpr (std::is_same_v<A, snapshot_action>)
            snapshot(self, a);
          else if constexpr (std::is_same_v<A, evaluate_action>)
            evaluate(self, a);
          else if constexpr (std::is_same_v<A, collect_action>)
            collect(self, a);
          else
            finish(self, a);
        },
        action);
  }
}

}  // namespace coordination

using namespace coordination;

coordinator_hdl::behavior_type coordinator(coordinator_hdl::stateful_pointer<coordinator_state> self, model_ptr model,
                                           run_options options, batch_fn data, std::vector<piece_state> initial) {
  self->state.initial = std::move(initial);
  self->state.model = std::move(model);
  self->state.options = std::move(options);
  self->state.base_lr = learning_rate(self->state.options.optimizer);
  {  // where the replicas' tables must agree (geo mode): the run's end, plan changes, checkpoints
    auto& o = self->state.options;
    o.exchange.steps = o.steps;
    o.exchange.change_at.clear();
    for (const auto& ch : o.changes) o.exchange.change_at.push_back(ch.at_step);
    o.exchange.checkpoint_every = o.checkpoint ? o.checkpoint->every : 0;
  }
  self->state.data_source = std::move(data);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& s = self->state;
    for (std::size_t r = 0; r < s.workers.size(); ++r)
      if (s.workers[r] && dm.source == s.workers[r].address()) {
        execute(self, s.protocol->on_worker_lost(static_cast<int>(r), to_string(dm.reason), fabric_reason(self),
                                                 clock_type::now()));
        return;
      }
  });
  return {
      [=](run_atom) -> caf::result<run_summary> {
        auto& s = self->state;
        s.done = self->make_response_promise<run_summary>();
        s.run_start = std::chrono::steady_clock::now();
        s.summary.cuts = s.model->cuts;
        const auto& o = s.options;
        s.fabric = o.job ? o.job->fabric : std::make_shared<transport::in_process_fabric>(s.model->plan.ranks());
        // (an evaluation between steps runs there too, in one process as across processes)
        if (o.job || o.on_evaluate) s.proxy = self->spawn<caf::detached>(control_proxy);
        if (o.job) s.live = o.job->live;  // the processes that started the job (a job that may grow has empty slots)
        planner_inputs in;
        in.model = s.model->source;
        in.batch = s.model->batch;
        in.rule = o.rule();
        in.optimizer_slots = state_slots(o.optimizer);
        in.setup = o.planning;
        in.changes = o.changes;
        in.refit = o.refit;
        in.replan = o.replan_on_loss;
        s.planner = self->spawn(planner_actor, std::move(in));
        if (o.checkpoint && o.checkpoint->every > 0) s.writer = self->spawn<caf::detached>(control_proxy);
        if (o.joining) {  // a replacement: its actors start from the state the recovery brings it
          s.owner = o.joining->state.owner_before;
          for (const auto& c : o.joining->state.cursor) s.cursor.begin(c);
        } else if (s.initial.empty()) {
          spawn_plan(self, o.first_step, nullptr);
        } else {
          auto initial = std::move(s.initial);
          spawn_plan(self, o.first_step, &initial);
        }
        step_protocol::config c;
        c.steps = o.steps;
        c.ranks = s.model->plan.ranks();
        c.local = local_flags(self);
        c.multi_process = o.job.has_value();
        c.max_restarts = o.max_restarts;
        for (const auto& ch : o.changes) c.change_at.push_back(ch.at_step);
        c.first_step = o.first_step;
        c.checkpoint_every = o.checkpoint ? o.checkpoint->every : 0;
        c.evaluate_every = o.evaluate_every;
        c.rejoin = o.job && o.job->await_membership != nullptr;
        c.replan_on_rejoin = c.rejoin && o.replan_on_loss.has_value();
        c.joining = o.joining.has_value();
        c.migrations = o.migrations;
        // every process watches the same sums, so a process that takes over from a lost
        // coordinator has the window it would have had; only the coordinator acts on it
        if (o.job && o.stragglers.factor > 0) s.stragglers.emplace(o.stragglers);
        s.protocol.emplace(std::move(c));
        execute(self, s.protocol->start(clock_type::now()));
        if (o.joining) join_running(self);
        return s.done;
      },
  };
}

}  // namespace cohort::actors
