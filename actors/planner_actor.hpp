// The planner actor: owns the job's view of planning — the model's cached analysis, the cost
// model with this machine's profile and its refit (planner::planning_setup), and the plan
// changes a run was asked for — and answers the coordinator at a step boundary with a new
// plan and the transition to it: the new plan compiled, the layout of every parameter piece
// before and after, and the copies that move every parameter and its optimizer state from
// the old layout to the new one (actors/state_layout.hpp).
//
// It also keeps the run's online refit (planner::online_refit): the coordinator shows it every
// committed step (observe_atom, no answer awaited) and asks for the prediction at the end.
//
// After a lost process it also decides the re-plan for the devices that remain (replan_atom,
// decide_replan: the run's own request on fewer devices), and when processes wait to join it
// decides whether the job grows (scale_atom, decide_scale): the plan for the larger job and
// whether the time it saves over the steps left exceeds what the transition costs.
//
// Deciding and preparing are two requests because across processes only the job's first
// process decides (it has the setup); the decision travels to the others over the control
// plane, and every process prepares the same transition from it.
//
//   planner::plan_request to_dp4;
//   to_dp4.mode = planner::plan_mode::manual;  to_dp4.dp = 4;
//   auto setup = planner::prepare_planning(tiny_mlp, /*optimizer_slots=*/0, /*batch=*/64, /*threads=*/2, to_dp4,
//                                          planner::machine_profile{}, planner::default_profile_path());
//   if (!setup) return setup.error();
//   planner_inputs in;
//   in.model = tiny_mlp;  in.batch = 64;
//   in.setup = std::make_shared<planner::planning_setup>(std::move(*setup));   // null where a process does not decide
//   in.changes = {plan_change{.at_step = 5, .request = to_dp4, .label = "dp4"}};
//   auto current = compile(tiny_mlp, {.dp = 2}, 64);
//   if (!current) return current.error();
//   auto now = std::make_shared<const compiled_model>(std::move(*current));
//   auto planner = sys.spawn(planner_actor, std::move(in));
//   caf::scoped_actor self{sys};
//   status failed;
//   auto on_error = [&](caf::error& e) { failed = from_caf(e); };
//   self->request(planner, 30s, plan_atom::value, /*change=*/std::size_t{0}, now).receive([&](decided_plan& d) {
//     self->request(planner, 30s, transfer_atom::value, d, now).receive([&](transition_plan& t) {
//       assert(t.model->plan.dp == 4 && t.to.size() == 4);   // and t.copies: every piece's new home
//     }, on_error);
//   }, on_error);
//   if (!failed) return failed;   // e.g. nothing fits, or a plan the model cannot take (named)
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <optional>
#include <vector>

#include "actors/batch_rule.hpp"
#include "actors/compile.hpp"
#include "actors/messages.hpp"
#include "actors/state_layout.hpp"
#include "planner/plan_choice.hpp"
#include "planner/run_refit.hpp"

namespace cohort::actors {

/// A plan change at a step boundary: after `at_step` steps, the plan `request` asks for (a
/// plan file, fixed degrees, or mode auto: the planner's choice for the current devices).
struct plan_change {
  std::int64_t at_step = 0;
  planner::plan_request request;
  std::string label;  // what the user wrote (--plan.change-to), for messages
};

struct decided_plan {
  planner::plan_choice choice;  // with the planner's cuts
  double replan_seconds = 0;    // deciding it (from the cached analysis)
  double predicted_step_s = 0;  // the planner's prediction for it (0: none)
};

/// How the job answers processes that ask to join it (--elastic.scale-out): auto grows only
/// when the cost model says it pays, always grows, never keeps them waiting as spares.
enum class scale_policy { automatic, always, never };

/// One answer to processes waiting to join (the summary's "scale_out"): the planner's plan for
/// the larger job, both predictions and whether growing pays over the steps left.
struct scale_decision {
  std::int64_t step = 0;  // steps done
  int waiting = 0;        // processes that asked to join (that the job has slots for)
  int processes_before = 0, processes_after = 0;
  std::string from, to;                // planner::describe of the running plan and the larger job's
  double predicted_step_s_before = 0;  // the running plan on the processes now
  double predicted_step_s_after = 0;   // the new plan on the processes after
  std::int64_t remaining_steps = 0;    // steps left to train
  double saved_s = 0;                  // (before - after) x remaining steps
  double bytes = 0;                    // state the transition moves across processes
  double cost_s = 0;                   // re-plan + compile + those bytes over the profile's link
  bool adopted = false;                // the job grows
  std::string why;                     // one sentence: the comparison, or the policy
};

/// What decide_scale is asked: the job now and the processes waiting.
struct scale_request {
  int joiners = 0;
  std::vector<bool> live;       // the job's processes now, by slot
  std::vector<int> owner;       // each rank's process now
  int threads_per_process = 1;  // compute threads (a joining process is taken to have as many)
  std::int64_t step = 0;        // steps done
  std::int64_t remaining_steps = 0;
  scale_policy policy = scale_policy::automatic;
};

struct scale_answer {
  decided_plan plan;  // for the larger job (meaningful when record.adopted)
  scale_decision record;
};

struct transition_plan {
  std::shared_ptr<const compiled_model> model;  // the new plan, compiled
  std::vector<piece_layout> from, to;
  std::vector<state_copy> copies;
  /// By new rank: the old rank whose parameter actor stays (kept_pieces; the coordinator sets
  /// it, knowing each rank's process, and drops the copies into those ranks), -1: a new one.
  std::vector<int> kept;
  planner::plan_choice choice;
  double prepare_seconds = 0;  // compiling it and planning the copies
};

struct planner_inputs {
  model_fn model;
  std::int64_t batch = 0;  // the first plan's global batch (the one the planner plans for)
  batch_rule rule;         // a new plan's batch (batch_rule::rows of its data-parallel degree; unset: `batch`)
  int optimizer_slots = 0;
  std::shared_ptr<planner::planning_setup> setup;  // null on a process that does not decide
  std::vector<plan_change> changes;
  /// What a re-plan after a lost process asks the planner for (the run's own request, the
  /// planner free where the run let it be); absent: the job keeps its plan after a loss.
  std::optional<planner::plan_request> replan;
  /// The online refit of the first plan's prediction (null: none, e.g. a process of a job
  /// whose refit process 0 makes from every process's times).
  std::shared_ptr<planner::online_refit> refit;
};

struct planner_state {
  planner_inputs in;
  static inline const char* name = "cohort.planner";
};

/// Decides change `change` for a job now running `current`. Errors: no setup (this process
/// does not decide), a plan the request cannot give (a bad file, nothing fits), a plan whose
/// ranks the job's processes cannot split (checked by the caller).
result<decided_plan> decide_plan(const planner_inputs& in, std::size_t change, const compiled_model& current);

/// After a lost process: the plan `in.replan` asks for on `devices` devices with `threads`
/// compute threads in all (the processes that remain). Errors: no re-plan asked for, no setup,
/// nothing fits those devices.
result<decided_plan> decide_replan(const planner_inputs& in, int devices, int threads);

/// Processes wait to join: the plan for the job they would make (the run's re-plan request on
/// the larger device set where the planner chose the plan, else the same plan placed over
/// them), both predicted, the state the transition moves (the joiners take the lowest empty
/// slots, as the control plane gives them), and the decision under `r.policy`. Errors: no
/// setup, nothing fits; a plan that cannot use the larger job is a refusal, not an error.
result<scale_answer> decide_scale(const planner_inputs& in, const scale_request& r, const compiled_model& current);

/// Compiles `decided` and plans the state transfer from `current`. Errors: a plan the model
/// cannot take (named), a transfer that cannot fill the new layout.
result<transition_plan> prepare_transition(const planner_inputs& in, const decided_plan& decided,
                                           const compiled_model& current);

planner_actor_hdl::behavior_type planner_actor(planner_actor_hdl::stateful_pointer<planner_state> self,
                                               planner_inputs in);

}  // namespace cohort::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::decided_plan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::transition_plan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::scale_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::scale_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::model_ptr)
