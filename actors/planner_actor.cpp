// The planner actor: decide a new plan, prepare the transition to it.
#include "actors/planner_actor.hpp"

#include <chrono>
#include <cstdio>

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

result<transition_plan> prepare_transition(const planner_inputs& in, const decided_plan& decided,
                                           const compiled_model& current) {
  const auto start = std::chrono::steady_clock::now();
  auto cm = compile(in.model, decided.choice.plan, in.batch, decided.choice.cuts, current.options);
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
