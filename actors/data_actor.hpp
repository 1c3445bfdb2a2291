// The data actor: computes a step's global batch once (from the app's batch function) and
// hands every replica's rows to the workers that read data inputs — all of a replica's
// micro-batches in one reply, so a worker asks once per step, not once per micro-batch (each
// request is a round trip through a scheduler thread that, on a machine whose cores all
// compute, waits for a time slice). When a core is
// left over by the workers (`prefetch`), it prepares step k+1 once step k is asked for, so
// batch assembly runs beside the computation instead of before it (on a machine whose cores
// all compute, that would only slow the computation down). The last two steps are kept, so
// a redone step finds its batch.
//
//   auto data = sys.spawn(data_actor, batch_fn(tiny_batch), /*dp=*/2, /*micro_batches=*/4, /*batch=*/64, /*prefetch=*/true);
//   caf::scoped_actor worker{sys};
//   worker->request(data, 10s, batch_atom::value, /*step=*/std::int64_t{0}, /*replica=*/1)
//       .receive([&](micro_batch& b) { assert(b.inputs.at("x").shape() == (shape{32, 8})); },   // 4 micro-batches x 8 rows
//                [&](caf::error& e) { std::cerr << to_string(e) << "\n"; });
#pragma once

#include <functional>

#include "actors/messages.hpp"

namespace cohort::actors {

/// The global batch of a step, by input name ([B, ...] each).
using batch_fn = std::function<result<std::map<std::string, tensor>>(std::int64_t step)>;

struct data_state {
  batch_fn source;
  int dp = 1, micro_batches = 1;
  std::int64_t batch = 0;  // the step's global batch, split by planner::batch_split
  bool prefetch = false;
  std::map<std::int64_t, std::map<std::string, tensor>> cached;  // the last two steps
  static inline const char* name = "cohort.data";

  /// Rows of all of replica `replica`'s micro-batches of step `step` (its share of the batch), in micro-batch order
  /// (computing the step's batch if it is not kept). Errors: a source error, a tensor with the
  /// wrong batch size.
  result<micro_batch> replica_rows(std::int64_t step, int replica);
  /// Computes and keeps step `step`'s batch if it is not kept yet.
  status prepare(std::int64_t step);
};

data_actor_hdl::behavior_type data_actor(data_actor_hdl::stateful_pointer<data_state> self, batch_fn source, int dp,
                                         int micro_batches, std::int64_t batch, bool prefetch);

}  // namespace cohort::actors
