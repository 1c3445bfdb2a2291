// train(): compile, run the coordinator, wait for its summary.
#include "actors/runtime.hpp"

#include "actors/checkpoint_store.hpp"
#include "actors/coordinator.hpp"
#include "planner/rank_layout.hpp"

#include <filesystem>

namespace cohort::actors {

result<run_summary> train(caf::actor_system& sys, const model_fn& model, batch_fn data, const run_options& o) {
  auto cm = compile(model, o.plan, o.rule().rows(o.plan.dp), o.stage_cuts, o.compile);
  if (!cm) return cm.error();
  if (o.steps < 1) return make_error(errc::invalid_argument, "train: steps must be >= 1");
  if (o.job) {
    const auto& j = *o.job;
    // a replacement's fabric comes with the recovery it joins
    const bool fabric_ok = o.joining ? !j.fabric : (j.fabric && j.fabric->size() == o.plan.ranks());
    const int lead = j.leader ? j.leader() : 0;  // process 0, or the process that took over from it
    const bool coordinator_live = j.live.empty() || (lead >= 0 && lead < static_cast<int>(j.live.size()) &&
                                                     j.live[static_cast<std::size_t>(lead)]);
    if (!fabric_ok || !j.sum_loss || !j.gather_pieces || !j.share_plan || !j.connect ||
        (o.joining && !j.await_membership) || static_cast<int>(j.live.size()) != j.processes || !coordinator_live)
      return make_error(errc::invalid_argument, "train: a multi-process job needs its fabric (for the plan's " +
                                                    std::to_string(o.plan.ranks()) + " ranks) and every hook");
  }
  if (o.evaluate_every < 0) return make_error(errc::invalid_argument, "train: evaluate_every must not be negative");
  if (o.evaluate_every > 0 && o.exchange.table_delay() > 0)
    return make_error(errc::invalid_argument,
                      "--eval.every reads the parameters between steps, which would apply async mode's waiting "
                      "table entries early: use --exec.mode=sync or geo, or evaluate at the end only");
  for (std::size_t i = 1; i < o.changes.size(); ++i)
    if (o.changes[i].at_step <= o.changes[i - 1].at_step)
      return make_error(errc::invalid_argument, "train: plan changes must come at ascending steps");
  if (o.first_step < 0 || o.first_step >= o.steps)
    return make_error(errc::invalid_argument, "train: the run starts after step " + std::to_string(o.first_step) +
                                                  " of " + std::to_string(o.steps) + ": nothing left to train");
  std::vector<piece_state> initial;
  if (o.initial_state) {
    auto layouts = piece_layouts(*cm);
    if (!layouts) return layouts.error();
    const auto owner = o.job ? planner::rank_layout::placed(o.plan.ranks(), o.job->live)
                             : std::vector<int>(static_cast<std::size_t>(o.plan.ranks()), 0);
    std::vector<bool> local;
    for (int p : owner) local.push_back(p == (o.job ? o.job->process : 0));
    auto pieces = o.initial_state(*layouts, local);
    if (!pieces) return pieces.error();
    initial = std::move(*pieces);
  }
  if (o.checkpoint && o.checkpoint->every > 0) {
    std::error_code ec;
    std::filesystem::create_directories(o.checkpoint->dir, ec);
    if (ec) return make_error(errc::io_error, o.checkpoint->dir + ": cannot create: " + ec.message());
    if (!o.job || o.job->leads()) checkpoint::remove_unfinished(o.checkpoint->dir);
  }
  if (o.on_start) o.on_start();
  auto shared = std::make_shared<const compiled_model>(std::move(*cm));
  auto coord = sys.spawn(coordinator, shared, o, std::move(data), std::move(initial));
  result<run_summary> out = make_error(errc::closed, "train: no answer from the coordinator");
  caf::scoped_actor self{sys};
  self->request(coord, caf::infinite, run_atom::value)
      .receive([&](run_summary& s) { out = std::move(s); }, [&](caf::error& e) { out = from_caf(e); });
  return out;
}

}  // namespace cohort::actors
