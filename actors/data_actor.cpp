// The data actor.
#include "actors/data_actor.hpp"

namespace cohort::actors {

result<micro_batch> data_state::slice(std::int64_t step, int replica, int mb) {
  if (replica < 0 || replica >= dp || mb < 0 || mb >= micro_batches)
    return make_error(errc::invalid_argument, "data: no replica " + std::to_string(replica) + " micro-batch " + std::to_string(mb));
  if (step != cached_step) {
    auto batch = source(step);
    if (!batch) return batch.error();
    for (const auto& [name, t] : *batch)
      if (t.shape().rank() < 1 || t.shape()[0] != rows * dp * micro_batches)
        return make_error(errc::shape_mismatch, "data: input '" + name + "' has batch " + t.shape().to_string() +
                                                    ", the plan splits " + std::to_string(rows * dp * micro_batches) + " rows");
    cached = std::move(*batch);
    cached_step = step;
  }
  micro_batch out;
  std::int64_t first = (static_cast<std::int64_t>(replica) * micro_batches + mb) * rows;
  // Rows of a row-major tensor are contiguous: hand out views of the cached batch, no copy.
  for (const auto& [name, t] : cached) out.inputs[name] = t.contiguous().slice(0, first, first + rows);
  return out;
}

caf::behavior data_actor(caf::stateful_actor<data_state>* self, batch_fn source, int dp, int micro_batches,
                         std::int64_t rows) {
  self->state.source = std::move(source);
  self->state.dp = dp;
  self->state.micro_batches = micro_batches;
  self->state.rows = rows;
  return {
      [=](batch_atom, std::int64_t step, int replica, int mb) -> caf::result<micro_batch> {
        auto r = self->state.slice(step, replica, mb);
        if (!r) return caf::make_error(caf::sec::runtime_error, r.error().message);
        return std::move(*r);
      },
  };
}

}  // namespace cohort::actors
