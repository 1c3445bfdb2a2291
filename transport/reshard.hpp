// Executes a reshard plan (graph/reshard.hpp) over a channel: every rank sends the boxes of
// its source piece that others need, receives the boxes of its destination piece, and adds
// or places them. A rank may be a source, a destination, both, or neither.
//
//   shape global{4, 6};
//   layout from{process_mesh({{"x", 2}}), {shard{0}}, {0, 1}};   // rows split over ranks 0, 1
//   layout to{process_mesh({{"x", 2}}), {shard{1}}, {0, 1}};     // columns split
//   auto plan = plan_reshard(global, from, to);
//   if (!plan) return plan.error();
//   in_process_fabric fabric(2);
//   std::vector<std::thread> ranks;
//   for (int r = 0; r < 2; ++r)
//     ranks.emplace_back([&, r] {
//       tensor mine = tensor::full(local_box(global, from, r).extent(), static_cast<float>(r));   // [2,6]
//       tensor out = tensor::empty(local_box(global, to, r).extent());                              // [4,3]
//       status st = execute_reshard(fabric.endpoint(r), *plan, &mine, &out, {.tag = 9, .timeout = 30s});
//     });
//   for (auto& t : ranks) t.join();
#pragma once

#include "graph/reshard.hpp"
#include "transport/collectives.hpp"

namespace cohort::transport {

/// `in`: this rank's source piece (null when it holds none); `out`: its destination piece
/// (null when it receives none), filled entirely (zeros where a Partial destination is empty).
status execute_reshard(channel& ch, const reshard_plan& plan, const tensor* in, tensor* out,
                       const collective_options& o);

}  // namespace cohort::transport
