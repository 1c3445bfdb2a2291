// The coordinator's plan transitions: the planner actor decides and prepares, the old pieces
// are exported and moved (in this process, or across processes over the old data plane), the
// old plan retires and the new one starts.
#include "actors/coordinator_parts.hpp"
#include "actors/transition.hpp"
#include "planner/rank_layout.hpp"
#include "transport/in_process.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>

namespace cohort::actors::coordination {

// The last step of a transition: the old plan retires, the new one starts from `states`.
void install_plan(self_ptr self, const transition_plan& t, std::vector<piece_state> states, fabric_ptr fabric,
                  transition_record rec, std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  // the parameter actors whose pieces stay as they are carry over; the rest retire
  std::vector<param_actor_hdl> kept(t.to.size());
  for (std::size_t r = 0; r < t.kept.size(); ++r)
    if (t.kept[r] >= 0) kept[r] = std::exchange(s.params[static_cast<std::size_t>(t.kept[r])], param_actor_hdl{});
  for (const auto& p : kept) rec.params_kept += p ? 1 : 0;
  for (const auto& p : s.params) rec.params_retired += p ? 1 : 0;
  for (const auto& w : s.workers) rec.workers_retired += w ? 1 : 0;
  retire_plan(self);
  if (s.options.job) {
    if (s.fabric) s.fabric->close("plan transition at step " + std::to_string(rec.step));  // (a newcomer has none)
    if (s.options.job->adopt_fabric) s.options.job->adopt_fabric(fabric);
  }
  s.fabric = std::move(fabric);
  s.model = t.model;
  spawn_plan(self, s.protocol->committed() + 1, &states, &kept);
  if (s.stragglers) s.stragglers->reset();  // the new placement's steps are counted afresh
  s.unrelieved = -1;
  if (rec.cause != "straggler") {  // another change: a straggler's move is not checked against it
    s.checking.reset();
    s.undo_due = s.undoing = false;
  }
  for (const auto& w : s.workers) rec.workers_spawned += w ? 1 : 0;
  rec.params_spawned = rec.workers_spawned - rec.params_kept;  // a worker per local rank, each with its actor
  if (s.options.rule().scales()) {
    rec.batch = s.model->batch;
    rec.lr = learning_rate(s.options.optimizer);
  }
  rec.seconds = since(started);
  s.summary.transitions.push_back(rec);
  if (s.options.on_transition) s.options.on_transition(rec);
  if (rec.cause == "loss") settle_recovery(self, rec.to, "changed to " + s.replan_note);
  execute(self, s.protocol->on_transition_done(t.model->plan.ranks(), local_flags(self), clock_type::now()));
}

// This process left the job in good order: its state moved to the others, its actors retire,
// its run ends here (the others collect the model).
void left(self_ptr self, transition_record rec, std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  retire_plan(self);
  s.fabric->close("this process left the job after step " + std::to_string(rec.step));
  rec.seconds = since(started);
  s.summary.transitions.push_back(rec);
  s.summary.left_after = rec.step;
  if (s.options.on_transition) s.options.on_transition(rec);
  execute(self, s.protocol->on_left());
}

void transition_lost(self_ptr self, const error& e) {
  auto& s = self->state;
  if (s.options.job && !s.live_at_transition.empty()) s.live = s.live_at_transition;  // a leaver is a member again
  if (s.fabric) s.fabric->close("the plan change failed: " + e.message);  // nothing waits on the old data plane
  execute(self, s.protocol->on_transition_lost(e, clock_type::now()));
}

// The old pieces exported: move them to the new layout (in this process, or across processes
// over the old data plane), then install the new plan.
void move_state(self_ptr self, std::shared_ptr<transition_plan> t, std::shared_ptr<std::vector<piece_state>> old,
                transition_record rec, std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  const auto slots = static_cast<std::size_t>(state_slots(s.options.optimizer));
  if (!s.options.job) {
    auto moved = apply_state_transfer(t->copies, *old, t->to, slots, rec.step, t->kept);
    rec.bytes_moved = transfer_bytes(t->copies, slots);
    install_plan(self, *t, std::move(moved), std::make_shared<transport::in_process_fabric>(t->model->plan.ranks()),
                 rec, started);
    return;
  }
  const auto& job = *s.options.job;
  exchange_options o;
  o.old_owner = s.owner;
  o.new_owner = owners_of(self, t->model->plan);
  o.process = job.process;
  o.processes = job.processes;
  o.slots = slots;
  o.steps = rec.step;
  o.tag = (transition_tag_space << 40) | static_cast<std::uint64_t>(rec.step);
  o.timeout = s.options.timeout;
  o.kept = t->kept;
  auto exchanged = std::make_shared<result<exchanged_state>>(make_error(errc::closed, "not exchanged"));
  auto fabric = std::make_shared<result<fabric_ptr>>(make_error(errc::closed, "not connected"));
  auto members = std::make_shared<result<job_membership>>(make_error(errc::closed, "not known"));
  auto old_fabric = s.fabric;
  auto connect = job.connect;
  auto new_owner = o.new_owner;
  // a leave: once every process, the leavers too, holds its new pieces, process 0 lets the
  // leavers go and the others take the membership without them before their new data plane
  const bool leave = rec.cause == "leave";
  const bool leaving_here = leave && !s.live[static_cast<std::size_t>(job.process)];
  std::vector<int> leavers;  // out of the view (leave), still holding ranks
  for (std::size_t p = 0; leave && p < s.live.size(); ++p)
    if (!s.live[p] && std::find(s.owner.begin(), s.owner.end(), static_cast<int>(p)) != s.owner.end())
      leavers.push_back(static_cast<int>(p));
  for (int p : leavers) rec.leaving += (rec.leaving.empty() ? "process " : ", process ") + std::to_string(p);
  auto gather = job.gather_lines;
  auto depart = job.depart;
  auto await = job.await_membership;
  const std::uint64_t epoch = s.membership_epoch;
  const bool first = job.leads();
  auto timed = std::make_shared<std::pair<double, double>>();  // connecting, moving the state (seconds)
  auto clock = [] { return std::chrono::steady_clock::now(); };
  if (s.options.on_state_move) s.options.on_state_move(rec.step);
  if (rec.cause == "join") {  // the newcomers are on no data plane yet: the new one carries the state
    o.fabric_owner = o.new_owner;
    const auto plan = t->model->plan;
    on_proxy(
        self,
        [=] {
          const auto t0 = clock();
          *fabric = connect(plan, new_owner);
          const auto t1 = clock();
          if (*fabric) *exchanged = exchange_state(***fabric, o, t->copies, *old, t->to);
          *timed = {std::chrono::duration<double>(t1 - t0).count(),
                    std::chrono::duration<double>(clock() - t1).count()};
        },
        [=]() mutable {
          auto& st = self->state;
          if (!*fabric || !*exchanged) {
            const error e = !*fabric ? (*fabric).error() : (*exchanged).error();
            // a process lost as the state moved to the newcomers: the others drop the join and
            // recover; a newcomer holds nothing to recover from and ends (it may be started again)
            if (std::find(st.owner.begin(), st.owner.end(), st.options.job->process) != st.owner.end())
              return transition_lost(self, e);
            return execute(self, st.protocol->on_error(make_error(
                                     errc::closed, std::string(run_options::join_dropped) + " (" + e.message + ")")));
          }
          rec.connect_seconds = timed->first;
          rec.move_seconds = timed->second;
          rec.bytes_moved = transfer_bytes(t->copies, o.slots);
          rec.bytes_across_processes = bytes_across_processes(t->copies, o);
          install_plan(self, *t, std::move((*exchanged)->states), **fabric, rec, started);
        });
    return;
  }
  on_proxy(
      self,
      [=] {
        const auto t0 = clock();
        *exchanged = exchange_state(*old_fabric, o, t->copies, *old, t->to);
        timed->second = std::chrono::duration<double>(clock() - t0).count();
        if (*exchanged && leave) {
          auto all_moved = gather("moved", epoch);
          if (!all_moved) *exchanged = all_moved.error();
          if (*exchanged && first)
            if (auto st = depart(leavers); !st) *exchanged = st.error();
          if (*exchanged && !leaving_here) {
            *members = await(epoch);
            if (!*members) *exchanged = (*members).error();
          }
        }
        const auto t1 = clock();
        if (*exchanged && !leaving_here) *fabric = connect(t->model->plan, new_owner);
        timed->first = std::chrono::duration<double>(clock() - t1).count();
      },
      [=]() mutable {
        auto& st = self->state;
        if (!*exchanged) return transition_lost(self, (*exchanged).error());
        rec.connect_seconds = timed->first;
        rec.move_seconds = timed->second;
        rec.bytes_moved = transfer_bytes(t->copies, o.slots);
        rec.bytes_across_processes = bytes_across_processes(t->copies, o);
        if (leaving_here) return left(self, rec, started);
        if (!*fabric) return transition_lost(self, (*fabric).error());
        if (leave) {
          st.membership_epoch = (*members)->epoch;
          st.live = (*members)->live;
        }
        install_plan(self, *t, std::move((*exchanged)->states), **fabric, rec, started);
      });
}

// The transition planned: the parameter actors that stay are chosen (the same pieces on the
// same process, on every process alike), and the pieces of this process that the copies read
// are exported.
void export_state(self_ptr self, std::shared_ptr<transition_plan> t, transition_record rec,
                  std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  t->kept = kept_pieces(t->from, t->to, s.owner, owners_of(self, t->model->plan));
  // under --elastic.batch=scale a new data-parallel degree brings a new learning rate: every
  // piece is exported (its committed gradient applied at the old rate) and respawned at the new
  if (s.options.rule().scales() && t->model->plan.dp != s.model->plan.dp) t->kept.clear();
  t->copies = without_kept(t->copies, t->kept);
  std::vector<bool> read(s.params.size(), false);
  for (const auto& c : t->copies) read[static_cast<std::size_t>(c.from_rank)] = true;
  auto old = std::make_shared<std::vector<piece_state>>(s.params.size());
  auto left = std::make_shared<std::size_t>(0);
  for (std::size_t r = 0; r < s.params.size(); ++r) *left += s.params[r] && read[r] ? 1 : 0;
  if (*left == 0) return move_state(self, t, old, rec, started);
  for (std::size_t r = 0; r < s.params.size(); ++r) {
    if (!s.params[r] || !read[r]) continue;
    self->request(s.params[r], s.options.timeout, export_atom::value, s.protocol->committed())
        .then(
            [=](piece_state& p) {
              (*old)[r] = std::move(p);
              if (--*left == 0) move_state(self, t, old, rec, started);
            },
            [=](caf::error& e) { execute(self, self->state.protocol->on_error(from_caf(e))); });
  }
}

void prepare(self_ptr self, decided_plan d, std::int64_t step, std::chrono::steady_clock::time_point started,
             const std::string& cause, std::vector<int> placement) {
  auto& s = self->state;
  const bool moving = !placement.empty();  // a migration: the same plan, one rank elsewhere
  const int processes = s.options.job ? static_cast<int>(std::count(s.live.begin(), s.live.end(), true)) : 1;
  // (a leave keeps the plan where the planner found none better, a join the user's plan: its
  // ranks placed on the processes of the job as after a loss, rank_layout::placed, unevenly if
  // need be)
  if (d.choice.plan.ranks() % processes != 0 && cause != "leave" && cause != "join" && !moving)
    return execute(self, s.protocol->on_error(make_error(
                             errc::invalid_argument,
                             "plan change at step " + std::to_string(step) + ": " + planner::describe(d.choice.plan) +
                                 " has " + std::to_string(d.choice.plan.ranks()) + " ranks, which " +
                                 std::to_string(processes) + " processes cannot split evenly")));
  transition_record rec;
  rec.step = step;
  rec.cause = cause;
  if (cause == "join") rec.joining = s.joining_note;
  if (moving) rec.moved = s.moving_note, rec.why = s.moving_why;
  s.placement = std::move(placement);  // the new plan's ranks: this placement, or the blocks again
  rec.from = planner::describe(s.model->plan);
  rec.to = planner::describe(d.choice.plan);
  rec.plan = d.choice.to_json();
  rec.replan_seconds = d.replan_seconds;
  rec.predicted_step_s = d.predicted_step_s;
  self->request(s.planner, s.options.timeout, transfer_atom::value, d, s.model)
      .then(
          [=](transition_plan& t) mutable {
            rec.prepare_seconds = t.prepare_seconds;
            export_state(self, std::make_shared<transition_plan>(std::move(t)), rec, started);
          },
          [=](caf::error& e) { execute(self, self->state.protocol->on_error(from_caf(e))); });
}

// Process 0's decision on every process: `mine` on process 0 (the planner's answer), null
// elsewhere. `then` gets the plan, or an error and whether it is the planner's own (a plan it
// could not find) rather than the sharing's (a lost process, a malformed message).
using decision_fn = std::function<void(result<decided_plan>, bool planners_error)>;

void share_decision(self_ptr self, const result<decided_plan>* mine, decision_fn then) {
  auto& s = self->state;
  std::string text;
  if (mine != nullptr)
    text = *mine
               ? nlohmann::json{{"plan", (*mine)->choice.to_json()},
                                {"replan_s", (*mine)->replan_seconds},
                                {"predicted_step_s", (*mine)->predicted_step_s}}
                     .dump()
               : nlohmann::json{{"error",
                                 {{"code", static_cast<int>(mine->error().code)}, {"message", mine->error().message}}}}
                     .dump();
  auto share_in = s.options.job->share_plan;
  const std::uint64_t epoch = s.membership_epoch;
  auto shared = std::make_shared<result<std::string>>(make_error(errc::closed, "not shared"));
  // {"plan": ..., "replan_s": ...} or {"error": {"code": ..., "message": ...}}
  auto received = [=] {
    if (!*shared) return then((*shared).error(), false);
    const auto malformed = make_error(errc::io_error, "the first process's plan change is malformed");
    auto j = nlohmann::json::parse(**shared, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return then(malformed, false);
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (!e.is_object() || !e.contains("code") || !e["code"].is_number_integer() || !e.contains("message") ||
          !e["message"].is_string())
        return then(malformed, false);
      const int code = e["code"].get<int>();
      if (code < static_cast<int>(errc::shape_mismatch) || code > static_cast<int>(errc::closed))
        return then(malformed, false);
      return then(make_error(static_cast<errc>(code), e["message"].get<std::string>()), true);
    }
    if (!j.contains("plan") || !j.contains("replan_s") || !j["replan_s"].is_number() ||
        !j.contains("predicted_step_s") || !j["predicted_step_s"].is_number() ||
        j["predicted_step_s"].get<double>() < 0)
      return then(malformed, false);
    auto choice = planner::plan_from_json(j["plan"], "the first process's plan change");
    if (!choice) return then(choice.error(), false);
    then(decided_plan{std::move(*choice), j["replan_s"].get<double>(), j["predicted_step_s"].get<double>()}, false);
  };
  on_proxy(
      self, [=] { *shared = share_in(text, epoch); }, received);
}

// On process 0: asks the planner actor (`ask` sends the request and hands over its answer),
// then shares the answer; elsewhere waits for process 0's.
void decide_everywhere(self_ptr self, std::function<void(std::function<void(result<decided_plan>)>)> ask,
                       decision_fn then) {
  if (!self->state.options.job->leads()) return share_decision(self, nullptr, std::move(then));
  ask([=](result<decided_plan> d) { share_decision(self, &d, then); });
}

// The devices of the processes that remain (s.live): as many as they held among the `before`
// processes of the plan (each held ranks / before).
int remaining_devices(const coordinator_state& s, int before) {
  const auto live = static_cast<int>(std::count(s.live.begin(), s.live.end(), true));
  return live * std::max(1, s.model->plan.ranks() / std::max(1, before));
}

// The planner's choice for `devices` devices of the processes that remain, with their threads,
// decided on process 0 and shared.
void decide_for_remaining(self_ptr self, int devices, decision_fn then) {
  auto& s = self->state;
  const int threads = s.options.threads * static_cast<int>(std::count(s.live.begin(), s.live.end(), true));
  auto ask = [=](std::function<void(result<decided_plan>)> answer) {
    self->request(self->state.planner, self->state.options.timeout, replan_atom::value, devices, threads,
                  self->state.model)
        .then([=](decided_plan& d) { answer(std::move(d)); }, [=](caf::error& e) { answer(from_caf(e)); });
  };
  decide_everywhere(self, ask, std::move(then));
}

// The re-plan after a lost process decided: the plan stays (the planner chose it again or
// found none for the devices left), or the job changes to the planner's choice.
void replan(self_ptr self, std::int64_t step, std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  const auto before = static_cast<int>(std::count(s.live_before_rejoin.begin(), s.live_before_rejoin.end(), true));
  const int devices = remaining_devices(s, before);
  auto keep = [=](const std::string& why) {
    auto& st = self->state;
    const std::string now = planner::describe(st.model->plan);
    settle_recovery(self, now, "kept " + now + ": " + why);
    execute(self, st.protocol->on_plan_kept(clock_type::now()));
  };
  decide_for_remaining(self, devices, [=](result<decided_plan> d, bool planners_error) {
    auto& st = self->state;
    if (!d && !planners_error) return transition_lost(self, d.error());
    if (!d) return keep(d.error().message);
    const std::string chosen = planner::describe(d->choice.plan);
    char note[64] = "";
    if (d->predicted_step_s > 0)
      std::snprintf(note, sizeof note, ", predicted %.4g ms per step", d->predicted_step_s * 1e3);
    const std::string what =
        "the planner's choice for " + std::to_string(devices) + (devices == 1 ? " device" : " devices") + note;
    if (chosen == planner::describe(st.model->plan) && d->choice.cuts == st.model->cuts) return keep(what);
    st.replan_note = chosen + " (" + what + ")";
    prepare(self, std::move(*d), step, started, "loss");
  });
}

// Processes leave the job in good order at this boundary (they asked in the step's sum): the
// plan for the processes that remain — the planner's choice for their devices where it chose
// the plan (run_options::replan_on_loss), else the same plan re-placed — and the job changes
// to it, the leavers' state moving over the data plane they are still on (move_state).
void leave(self_ptr self, const transition_action& a, std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  const std::int64_t step = a.step;
  auto fail = [=](const error& e) { execute(self, self->state.protocol->on_error(e)); };
  if (!s.options.job || !s.options.job->depart || !s.options.job->await_membership || !s.options.job->gather_lines)
    return fail(make_error(errc::invalid_argument, "leaving the job needs a job that keeps going (--fault.recover)"));
  const int before = static_cast<int>(std::count(s.live.begin(), s.live.end(), true));
  // the leavers are out of this process's view now (they still hold their ranks: s.owner); the
  // control plane lets them go once their state has moved (move_state)
  for (std::size_t p = 1; p < a.leave.size() && p < s.live.size(); ++p)  // process 0 coordinates: it never leaves
    if (a.leave[p]) s.live[p] = false;
  if (const auto left = std::count(s.live.begin(), s.live.end(), true); left < s.options.min_processes)
    return fail(make_error(
        errc::closed, "a leave after step " + std::to_string(step) + " would leave " + std::to_string(left) +
                          " processes, fewer than --elastic.min-procs=" + std::to_string(s.options.min_processes)));
  cancel_waiting_writes(self);  // a checkpoint still waiting for a leaver's file never gets it
  decided_plan same;
  same.choice.plan = s.model->plan;
  same.choice.cuts = s.model->cuts;
  same.choice.how = "the running job's";
  if (!s.options.replan_on_loss) return prepare(self, same, step, started, "leave");
  decide_for_remaining(self, remaining_devices(s, before), [=](result<decided_plan> d, bool planners_error) {
    if (!d && !planners_error) return transition_lost(self, d.error());
    prepare(self, d ? std::move(*d) : same, step, started, "leave");  // none found: the same plan re-placed
  });
}

void transition(self_ptr self, const transition_action& a) {
  auto& s = self->state;
  const auto started = std::chrono::steady_clock::now();
  const std::int64_t step = a.step;
  auto fail = [=](const error& e) { execute(self, self->state.protocol->on_error(e)); };
  s.live_at_transition = s.live;
  if (s.options.on_transition_start) s.options.on_transition_start(step);
  if (!a.leave.empty()) return leave(self, a, started);
  if (a.joiners > 0) {
    if (!s.options.job) return fail(make_error(errc::invalid_argument, "only a job of processes grows"));
    return grow(self, a, started);
  }
  if (a.straggler >= 0 || a.migration >= 0) {
    if (!s.options.job) return fail(make_error(errc::invalid_argument, "only a job of processes migrates ranks"));
    return migrate(self, a, started);
  }
  if (a.replan) {
    if (!s.options.job)
      return fail(make_error(errc::invalid_argument, "a re-plan after a loss needs a job of processes"));
    return replan(self, step, started);
  }
  if (!s.options.job) {
    self->request(s.planner, s.options.timeout, plan_atom::value, a.change, s.model)
        .then([=](decided_plan& d) { prepare(self, std::move(d), step, started, "request"); },
              [=](caf::error& e) { fail(from_caf(e)); });
    return;
  }
  // across processes the first process decides and shares the plan; every process prepares it
  const std::size_t change = a.change;
  auto ask = [=](std::function<void(result<decided_plan>)> answer) {
    self->request(self->state.planner, self->state.options.timeout, plan_atom::value, change, self->state.model)
        .then([=](decided_plan& d) { answer(std::move(d)); }, [=](caf::error& e) { answer(from_caf(e)); });
  };
  decide_everywhere(self, ask, [=](result<decided_plan> d, bool planners_error) {
    if (!d && !planners_error) return transition_lost(self, d.error());
    if (!d) return fail(d.error());
    prepare(self, std::move(*d), step, started, "request");
  });
}

}  // namespace cohort::actors::coordination
