// train(): compile, run the coordinator, wait for its summary.
#include "actors/runtime.hpp"

#include "actors/coordinator.hpp"
#include "kernels/threads.hpp"

namespace cohort::actors {

result<run_summary> train(caf::actor_system& sys, const model_fn& model, batch_fn data, const run_options& o) {
  auto cm = compile(model, o.plan, o.batch, o.stage_cuts);
  if (!cm) return cm.error();
  if (o.steps < 1) return make_error(errc::invalid_argument, "train: steps must be >= 1");
  int local = o.plan.ranks();
  if (o.fabric) {
    if (o.fabric->size() != o.plan.ranks() || !o.combine_loss || !o.gather_pieces)
      return make_error(errc::invalid_argument, "train: a multi-process fabric of " + std::to_string(o.fabric->size()) +
                                                    " ranks for a plan of " + std::to_string(o.plan.ranks()));
    local = o.fabric->local_ranks();
  }
  kernels::set_math_threads(std::max(1, o.threads / std::max(1, local)));
  if (o.on_start) o.on_start();
  auto shared = std::make_shared<const compiled_model>(std::move(*cm));
  auto coord = sys.spawn(coordinator, shared, o, std::move(data));
  result<run_summary> out = make_error(errc::closed, "train: no answer from the coordinator");
  caf::scoped_actor self{sys};
  self->request(coord, caf::infinite, run_atom::value)
      .receive([&](run_summary& s) { out = std::move(s); },
               [&](caf::error& e) { out = make_error(errc::closed, sys.render(e)); });
  return out;
}

}  // namespace cohort::actors
