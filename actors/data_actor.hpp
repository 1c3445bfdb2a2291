// The data actor: computes a step's global batch once (from the app's batch function, through
// the data cursor: which samples the step takes) and hands every replica's rows to the workers
// that read data inputs — all of a replica's micro-batches in one reply, so a worker asks once
// per step, not once per micro-batch (each request is a round trip through a scheduler thread
// that, on a machine whose cores all compute, waits for a time slice). When a core is left
// over by the workers (`prefetch`), it prepares step k+1 once step k is asked for, so batch
// assembly runs beside the computation instead of before it (on a machine whose cores all
// compute, that would only slow the computation down). The last two steps are kept, so a
// redone step finds its batch. A new plan splits the same stream another way: the same batch
// (a plan change under --elastic.batch=fixed), or another (scale: the step's samples follow
// on from the last step's, data_cursor.hpp).
//
//   auto data = sys.spawn(data_actor, batch_fn(tiny_batch), data_split{.dp = 2, .micro_batches = 4, .batch = 64,
//                         .source_rows = 64, .prefetch = true});
//   caf::scoped_actor worker{sys};
//   worker->request(data, 10s, batch_atom::value, /*step=*/std::int64_t{0}, /*replica=*/1)
//       .receive([&](micro_batch& b) { assert(b.inputs.at("x").shape() == (shape{32, 8})); },   // 4 micro-batches x 8 rows
//                [&](caf::error& e) { std::cerr << to_string(e) << "\n"; });
#pragma once

#include <functional>

#include "actors/data_cursor.hpp"
#include "actors/messages.hpp"

namespace cohort::actors {

/// Source batch k of the app's stream ([S, ...] each input, S the run's --train.batch): in a
/// job whose batch never changes, step k's global batch.
using batch_fn = std::function<result<std::map<std::string, tensor>>(std::int64_t step)>;

struct data_state {
  batch_fn source;
  data_split split;
  std::map<std::int64_t, std::map<std::string, tensor>> cached;  // the last two steps
  std::map<std::int64_t, input_batch> source_cache;              // source batches a step spans
  static inline const char* name = "cohort.data";

  /// Rows of all of replica `replica`'s micro-batches of step `step` (its share of the batch), in micro-batch order
  /// (computing the step's batch if it is not kept). Errors: a source error, a tensor with the
  /// wrong batch size.
  result<micro_batch> replica_rows(std::int64_t step, int replica);
  /// Computes and keeps step `step`'s batch if it is not kept yet.
  status prepare(std::int64_t step);
  /// A new split; the kept steps it changes are dropped.
  void configure(data_split s);
};

/// The first sample of step `step` under `s`.
std::int64_t first_sample(const data_split& s, std::int64_t step);

data_actor_hdl::behavior_type data_actor(data_actor_hdl::stateful_pointer<data_state> self, batch_fn source,
                                         data_split split);

}  // namespace cohort::actors
