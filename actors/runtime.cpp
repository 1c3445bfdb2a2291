// train(): compile, run the coordinator, wait for its summary.
#include "actors/runtime.hpp"

#include "actors/coordinator.hpp"

namespace cohort::actors {

result<run_summary> train(caf::actor_system& sys, const model_fn& model, batch_fn data, const run_options& o) {
  auto cm = compile(model, o.plan, o.batch, o.stage_cuts);
  if (!cm) return cm.error();
  if (o.steps < 1) return make_error(errc::invalid_argument, "train: steps must be >= 1");
  if (o.job) {
    const auto& j = *o.job;
    if (!j.fabric || j.fabric->size() != o.plan.ranks() || !j.sum_loss || !j.gather_pieces || !j.share_plan ||
        !j.connect)
      return make_error(errc::invalid_argument, "train: a multi-process job needs its fabric (for the plan's " +
                                                    std::to_string(o.plan.ranks()) + " ranks) and every hook");
  }
  for (std::size_t i = 1; i < o.changes.size(); ++i)
    if (o.changes[i].at_step <= o.changes[i - 1].at_step)
      return make_error(errc::invalid_argument, "train: plan changes must come at ascending steps");
  if (o.on_start) o.on_start();
  auto shared = std::make_shared<const compiled_model>(std::move(*cm));
  auto coord = sys.spawn(coordinator, shared, o, std::move(data));
  result<run_summary> out = make_error(errc::closed, "train: no answer from the coordinator");
  caf::scoped_actor self{sys};
  self->request(coord, caf::infinite, run_atom::value)
      .receive([&](run_summary& s) { out = std::move(s); }, [&](caf::error& e) { out = from_caf(e); });
  return out;
}

}  // namespace cohort::actors
