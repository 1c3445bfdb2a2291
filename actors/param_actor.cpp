// The parameter actor.
#include "actors/param_actor.hpp"

namespace cohort::actors {

status param_state::attach(tensor storage) {
  if (!shard) {
    shard = std::make_unique<param_shard>(std::move(storage), optimizer);  // the first worker's values
    return {};
  }
  return shard->rebind(std::move(storage));  // a respawned worker: refill it, then update it
}

status param_state::submit(std::int64_t gen, std::int64_t step, tensor grad) {
  if (gen != generation)
    return make_error(errc::invalid_argument, "parameters: gradient from generation " + std::to_string(gen) +
                                                  ", now " + std::to_string(generation) + " (ignored)");
  pending = std::move(grad);
  pending_step = step;
  return {};
}

status param_state::commit(std::int64_t step) {
  if (!shard) return make_error(errc::invalid_argument, "parameters: commit before any worker attached");
  if (pending_step != step)
    return make_error(errc::invalid_argument, "parameters: commit of step " + std::to_string(step) +
                                                  " but the pending gradient is for step " + std::to_string(pending_step));
  auto updated = shard->update(pending);
  pending = tensor();
  pending_step = -1;
  if (!updated) return updated.error();
  return {};
}

void param_state::rollback(std::int64_t new_generation) {
  generation = new_generation;
  pending = tensor();
  pending_step = -1;
}

namespace {
caf::error to_caf(const error& e) { return caf::make_error(caf::sec::runtime_error, e.message); }
}  // namespace

caf::behavior param_actor(caf::stateful_actor<param_state>* self, optimizer_config optimizer) {
  self->state.optimizer = optimizer;
  return {
      [=](attach_atom, tensor& storage) -> caf::result<ok_atom> {
        if (auto st = self->state.attach(std::move(storage)); !st) return to_caf(st.error());
        return ok_atom::value;
      },
      [=](update_atom, std::int64_t gen, std::int64_t step, tensor& grad) -> caf::result<ok_atom> {
        if (auto st = self->state.submit(gen, step, std::move(grad)); !st) return to_caf(st.error());
        return ok_atom::value;
      },
      [=](commit_atom, std::int64_t step) -> caf::result<ok_atom> {
        if (auto st = self->state.commit(step); !st) return to_caf(st.error());
        return ok_atom::value;
      },
      [=](fetch_atom) -> caf::result<tensor> {
        if (!self->state.shard) return caf::make_error(caf::sec::runtime_error, "parameters: nothing attached");
        return self->state.shard->params().clone();
      },
      [=](rollback_atom, std::int64_t new_generation) {
        self->state.rollback(new_generation);
        return ok_atom::value;
      },
  };
}

}  // namespace cohort::actors
