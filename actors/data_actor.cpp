// The data actor.
#include "actors/data_actor.hpp"

#include "planner/batch_split.hpp"

namespace cohort::actors {

status data_state::prepare(std::int64_t step) {
  if (cached.count(step) != 0) return {};
  auto made = source(step);
  if (!made) return made.error();
  for (auto& [name, t] : *made) {
    if (t.shape().rank() < 1 || t.shape()[0] != batch)
      return make_error(errc::shape_mismatch, "data: input '" + name + "' has batch " + t.shape().to_string() +
                                                  ", the plan splits " + std::to_string(batch) + " rows");
    t = t.contiguous();
  }
  cached[step] = std::move(*made);
  // keep this step and the one prefetched after it (a job rolled back to a checkpoint asks for
  // an earlier step again: the later ones go, never the one just made)
  for (auto it = cached.begin(); cached.size() > 2 && it != cached.end();)
    it = it->first != step && it->first != step + 1 ? cached.erase(it) : std::next(it);
  return {};
}

result<micro_batch> data_state::replica_rows(std::int64_t step, int replica) {
  if (replica < 0 || replica >= dp)
    return make_error(errc::invalid_argument, "data: no replica " + std::to_string(replica));
  if (auto st = prepare(step); !st) return st.error();
  micro_batch out;
  const planner::batch_split split{batch, dp, micro_batches};
  const std::int64_t first = split.first(replica, 0);
  // rows of a row-major tensor are contiguous: views of the kept batch, no copy
  for (const auto& [name, t] : cached.at(step))
    out.inputs[name] = t.slice(0, first, first + split.replica_rows(replica));
  return out;
}

data_actor_hdl::behavior_type data_actor(data_actor_hdl::stateful_pointer<data_state> self, batch_fn source, int dp,
                                         int micro_batches, std::int64_t batch, bool prefetch) {
  self->state.source = std::move(source);
  self->state.dp = dp;
  self->state.micro_batches = micro_batches;
  self->state.batch = batch;
  self->state.prefetch = prefetch;
  return {
      [=](batch_atom, std::int64_t step, int replica) -> caf::result<micro_batch> {
        bool fresh = self->state.cached.count(step) == 0;
        auto r = self->state.replica_rows(step, replica);
        if (!r) return to_caf(r.error());  // its cohort code survives (a bad batch shape is bad input)
        if (fresh && self->state.prefetch) self->send(self, prepare_atom::value, step + 1);  // after this reply
        return std::move(*r);
      },
      [=](prepare_atom, std::int64_t step) {
        (void)self->state.prepare(step);  // an error shows when the step is asked for
      },
      [=](configure_atom, int dp, int micro_batches, std::int64_t batch, bool prefetch) {
        auto& s = self->state;
        s.dp = dp, s.micro_batches = micro_batches, s.batch = batch,
        s.prefetch = prefetch;  // the kept batches stay valid
      },
  };
}

}  // namespace cohort::actors
