// The data actor.
#include "actors/data_actor.hpp"

#include "planner/batch_split.hpp"

namespace cohort::actors {

std::int64_t first_sample(const data_split& s, std::int64_t step) {
  const std::int64_t from = s.from_sample >= 0 ? s.from_sample : s.from_step * s.batch;
  return from + (step - s.from_step) * s.batch;
}

void data_state::configure(data_split s) {
  if (s.source_rows <= 0) s.source_rows = s.batch;
  const bool same_rows = s.batch == split.batch && s.source_rows == split.source_rows;
  const data_split old = split;
  split = s;
  // a kept step stays valid where the new split takes the same samples for it
  for (auto it = cached.begin(); it != cached.end();)
    it = same_rows && first_sample(old, it->first) == first_sample(split, it->first) ? std::next(it) : cached.erase(it);
}

status data_state::prepare(std::int64_t step) {
  if (cached.count(step) != 0) return {};
  const std::int64_t batch = split.batch, source_rows = split.source_rows > 0 ? split.source_rows : batch;
  const std::int64_t first = first_sample(split, step);
  if (first < 0)
    return make_error(errc::invalid_argument, "data: step " + std::to_string(step) + " is before the data cursor's " +
                                                  std::to_string(split.from_step));
  if (batch == source_rows && first % source_rows == 0) {  // one source batch, whole: no copy
    auto made = source(first / source_rows);
    if (!made) return made.error();
    for (auto& [name, t] : *made) {
      if (t.shape().rank() < 1 || t.shape()[0] != batch)
        return make_error(errc::shape_mismatch, "data: input '" + name + "' has batch " + t.shape().to_string() +
                                                    ", the plan splits " + std::to_string(batch) + " rows");
      t = t.contiguous();
    }
    cached[step] = std::move(*made);
  } else {
    auto made = stream_rows(source, source_rows, first, batch, source_cache);
    if (!made) return made.error();
    cached[step] = std::move(*made);
    // the source batches behind this step go; those it ends in may start the next
    for (auto it = source_cache.begin(); it != source_cache.end();)
      it = it->first < first / source_rows || it->first > (first + batch) / source_rows + 1 ? source_cache.erase(it)
                                                                                            : std::next(it);
  }
  // keep this step and the one prefetched after it (a job rolled back to a checkpoint asks for
  // an earlier step again: the later ones go, never the one just made)
  for (auto it = cached.begin(); cached.size() > 2 && it != cached.end();)
    it = it->first != step && it->first != step + 1 ? cached.erase(it) : std::next(it);
  return {};
}

result<micro_batch> data_state::replica_rows(std::int64_t step, int replica) {
  if (replica < 0 || replica >= split.dp)
    return make_error(errc::invalid_argument, "data: no replica " + std::to_string(replica));
  if (auto st = prepare(step); !st) return st.error();
  micro_batch out;
  const planner::batch_split rows{split.batch, split.dp, split.micro_batches};
  const std::int64_t first = rows.first(replica, 0);
  // rows of a row-major tensor are contiguous: views of the kept batch, no copy
  for (const auto& [name, t] : cached.at(step))
    out.inputs[name] = t.slice(0, first, first + rows.replica_rows(replica));
  return out;
}

data_actor_hdl::behavior_type data_actor(data_actor_hdl::stateful_pointer<data_state> self, batch_fn source,
                                         data_split split) {
  self->state.source = std::move(source);
  self->state.configure(split);
  return {
      [=](batch_atom, std::int64_t step, int replica) -> caf::result<micro_batch> {
        bool fresh = self->state.cached.count(step) == 0;
        auto r = self->state.replica_rows(step, replica);
        if (!r) return to_caf(r.error());  // its cohort code survives (a bad batch shape is bad input)
        if (fresh && self->state.split.prefetch) self->send(self, prepare_atom::value, step + 1);  // after this reply
        return std::move(*r);
      },
      [=](prepare_atom, std::int64_t step) {
        (void)self->state.prepare(step);  // an error shows when the step is asked for
      },
      [=](configure_atom, data_split split) { self->state.configure(split); },
  };
}

}  // namespace cohort::actors
