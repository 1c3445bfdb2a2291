// The planner actor: decide a new plan, prepare the transition to it.
#include "actors/planner_actor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "actors/transition.hpp"
#include "planner/rank_layout.hpp"

namespace cohort::actors {
namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

result<decided_plan> decide_plan(const planner_inputs& in, std::size_t change, const compiled_model& current) {
  if (change >= in.changes.size())
    return make_error(errc::invalid_argument, "planner: no plan change #" + std::to_string(change));
  if (!in.setup)
    return make_error(errc::invalid_argument, "planner: this process does not plan (the job's first process does)");
  const auto start = std::chrono::steady_clock::now();
  const plan_change& c = in.changes[change];
  auto choice = c.request.mode == planner::plan_mode::automatic && c.request.file.empty()
                    ? planner::choose_plan_for(*in.setup, c.request, current.plan.ranks())
                    : planner::choose_plan(*in.setup, c.request);
  if (!choice) return make_error(choice.error().code, "--plan.change-to=" + c.label + ": " + choice.error().message);
  decided_plan d;
  d.choice = std::move(*choice);
  d.replan_seconds = since(start);
  if (d.choice.predicted) d.predicted_step_s = d.choice.predicted->step_s;
  return d;
}

result<decided_plan> decide_replan(const planner_inputs& in, int devices, int threads) {
  if (!in.replan) return make_error(errc::invalid_argument, "planner: this job keeps its plan after a loss");
  if (!in.setup)
    return make_error(errc::invalid_argument, "planner: this process does not plan (the job's first process does)");
  const auto start = std::chrono::steady_clock::now();
  auto choice = planner::choose_plan_for(*in.setup, *in.replan, devices, threads);
  if (!choice)
    return make_error(choice.error().code,
                      "a plan for the " + std::to_string(devices) + " devices that remain: " + choice.error().message);
  decided_plan d;
  d.choice = std::move(*choice);
  d.replan_seconds = since(start);
  if (d.choice.predicted) d.predicted_step_s = d.choice.predicted->step_s;
  return d;
}

namespace {

// The cost model's step time for `plan` (with `cuts`) on its own ranks sharing `threads` threads.
result<double> price(const planner::planning_setup& setup, const planner::parallel_plan& plan,
                     const std::vector<std::size_t>& cuts, int threads) {
  planner::plan_request q;
  q.mode = planner::plan_mode::manual;
  q.dp = plan.dp, q.tp = plan.tp, q.pp = plan.pp, q.micro_batches = plan.micro_batches;
  q.virtual_stages = plan.virtual_stages;
  q.schedule = planner::to_string(plan.schedule);
  q.shard_params = plan.shard_params;
  q.cuts.assign(cuts.begin(), cuts.end());
  auto c = planner::choose_plan_for(setup, q, plan.ranks(), threads);
  if (!c) return c.error();
  if (!c->predicted) return make_error(errc::invalid_argument, "no prediction for " + planner::describe(plan));
  return c->predicted->step_s;
}

std::string seconds_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g s", s);
  return b;
}

}  // namespace

result<scale_answer> decide_scale(const planner_inputs& in, const scale_request& r, const compiled_model& current) {
  if (!in.setup)
    return make_error(errc::invalid_argument, "planner: this process does not plan (the job's first process does)");
  const auto start = std::chrono::steady_clock::now();
  scale_answer out;
  scale_decision& d = out.record;
  d.step = r.step;
  d.waiting = r.joiners;
  d.remaining_steps = r.remaining_steps;
  d.processes_before = static_cast<int>(std::count(r.live.begin(), r.live.end(), true));
  // the joiners take the lowest empty slots (transport::control_plane::admit_joiners)
  std::vector<bool> after = r.live;
  for (std::size_t p = 1, left = static_cast<std::size_t>(r.joiners); p < after.size() && left > 0; ++p)
    if (!after[p]) after[p] = true, --left;
  d.processes_after = static_cast<int>(std::count(after.begin(), after.end(), true));
  d.from = planner::describe(current.plan);
  const int threads_now = r.threads_per_process * d.processes_before;
  const int threads_after = r.threads_per_process * d.processes_after;
  auto before = price(*in.setup, current.plan, current.cuts, threads_now);
  if (!before) return before.error();
  d.predicted_step_s_before = *before;
  result<planner::plan_choice> next = make_error(errc::closed, "none");
  if (in.replan) {  // the planner chose the plan: its choice for the larger device set
    const int per_process = std::max(1, current.plan.ranks() / std::max(1, d.processes_before));
    next = planner::choose_plan_for(*in.setup, *in.replan, per_process * d.processes_after, threads_after);
    if (!next)
      return make_error(next.error().code, "a plan for the " + std::to_string(d.processes_after) +
                                               " processes of the larger job: " + next.error().message);
  } else {  // the user's plan, placed over the larger job
    planner::plan_choice same;
    same.plan = current.plan;
    same.cuts = current.cuts;
    same.how = "the running job's";
    next = std::move(same);
  }
  d.to = planner::describe(next->plan);
  out.plan.choice = *next;
  out.plan.replan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (next->plan.ranks() < d.processes_after) {
    d.adopted = false;
    d.why = d.to + " has " + std::to_string(next->plan.ranks()) + " ranks: it cannot use " +
            std::to_string(d.processes_after) + " processes (--fault.replan=always lets the planner re-plan)";
    return out;
  }
  auto priced = price(*in.setup, next->plan, next->cuts, threads_after);
  if (!priced) return priced.error();
  d.predicted_step_s_after = *priced;
  out.plan.predicted_step_s = *priced;
  // what the transition costs: deciding, compiling, and the state the new owners lack over the link
  auto t = prepare_transition(in, out.plan, current);
  if (!t) return t.error();
  exchange_options o;
  o.old_owner = r.owner;
  o.new_owner = planner::rank_layout::placed(next->plan.ranks(), after);
  o.slots = static_cast<std::size_t>(in.optimizer_slots);
  // as the coordinator will move it: a piece that stays on its process is not copied at all
  const auto kept = kept_pieces(t->from, t->to, o.old_owner, o.new_owner);
  d.bytes = bytes_across_processes(without_kept(t->copies, kept), o);
  const auto& link = in.setup->profile.link;
  const double moving = link.bandwidth_bytes_per_s > 0 ? d.bytes / link.bandwidth_bytes_per_s + link.latency_s : 0;
  d.cost_s = out.plan.replan_seconds + t->prepare_seconds + moving;
  d.saved_s = (d.predicted_step_s_before - d.predicted_step_s_after) * static_cast<double>(r.remaining_steps);
  const std::string comparison = "saves " + seconds_text(d.saved_s) + " over " + std::to_string(r.remaining_steps) +
                                 " steps (" + seconds_text(d.predicted_step_s_before) + " -> " +
                                 seconds_text(d.predicted_step_s_after) + " per step), the transition costs " +
                                 seconds_text(d.cost_s);
  switch (r.policy) {
    case scale_policy::always:
      d.adopted = true;
      d.why = "--elastic.scale-out=always (the cost model: " + comparison + ")";
      break;
    case scale_policy::never:
      d.adopted = false;
      d.why = "--elastic.scale-out=never: they wait as spares (the cost model: " + comparison + ")";
      break;
    case scale_policy::automatic:
      d.adopted = d.saved_s > d.cost_s;
      d.why = (d.adopted ? "pays: " : "does not pay: ") + comparison;
      break;
  }
  return out;
}

result<transition_plan> prepare_transition(const planner_inputs& in, const decided_plan& decided,
                                           const compiled_model& current) {
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t rows = in.rule.batch > 0 ? in.rule.rows(decided.choice.plan.dp) : in.batch;
  auto cm = compile(in.model, decided.choice.plan, rows, decided.choice.cuts, current.options);
  if (!cm)
    return make_error(cm.error().code,
                      "the new plan " + planner::describe(decided.choice.plan) + ": " + cm.error().message);
  transition_plan t;
  t.model = std::make_shared<const compiled_model>(std::move(*cm));
  auto from = piece_layouts(current);
  if (!from) return from.error();
  auto to = piece_layouts(*t.model);
  if (!to) return to.error();
  auto copies = plan_state_transfer(*from, *to);
  if (!copies) return copies.error();
  t.from = std::move(*from);
  t.to = std::move(*to);
  t.copies = std::move(*copies);
  t.choice = decided.choice;
  t.prepare_seconds = since(start);
  return t;
}

planner_actor_hdl::behavior_type planner_actor(planner_actor_hdl::stateful_pointer<planner_state> self,
                                               planner_inputs in) {
  self->state.in = std::move(in);
  return {
      [=](plan_atom, std::size_t change, model_ptr& current) -> caf::result<decided_plan> {
        auto d = decide_plan(self->state.in, change, *current);
        if (!d) return to_caf(d.error());
        return std::move(*d);
      },
      [=](replan_atom, int devices, int threads, model_ptr&) -> caf::result<decided_plan> {
        auto d = decide_replan(self->state.in, devices, threads);
        if (!d) return to_caf(d.error());
        return std::move(*d);
      },
      [=](scale_atom, scale_request& r, model_ptr& current) -> caf::result<scale_answer> {
        auto d = decide_scale(self->state.in, r, *current);
        if (!d) return to_caf(d.error());
        return std::move(*d);
      },
      [=](transfer_atom, decided_plan& decided, model_ptr& current) -> caf::result<transition_plan> {
        auto t = prepare_transition(self->state.in, decided, *current);
        if (!t) return to_caf(t.error());
        return std::move(*t);
      },
      [=](observe_atom, const step_metrics& m) {
        auto& r = self->state.in.refit;
        if (!r) return;
        auto early = r->observe(m.step, m.layout, m.task_seconds, m.seconds);
        if (early)
          std::fprintf(stderr,
                       "\nrefit after %lld steps: predicted %.4g ms per step, measured %.4g ms; compute x%.3g, "
                       "reduction x%.3g\n",
                       static_cast<long long>(r->totals().steps), (*early)["predicted_step_s"].get<double>() * 1e3,
                       (*early)["measured_step_s"].get<double>() * 1e3,
                       (*early)["refit"]["compute_factor"].get<double>(),
                       (*early)["refit"]["reduce_factor"].get<double>());
      },
      [=](refit_atom) -> caf::result<std::string> {
        auto& r = self->state.in.refit;
        return r ? r->finish().dump() : std::string("{}");
      },
  };
}

}  // namespace cohort::actors
