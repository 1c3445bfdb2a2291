// Executes a reshard plan (graph/reshard.hpp) over a channel: every rank sends the boxes of
// its source piece that others need, receives the boxes of its destination piece, and adds
// or places them. A rank may be a source, a destination, both, or neither.
//
//   auto plan = plan_reshard(global, from, to);
//   tensor out = tensor::empty(local_box(global, to, my_position).extent());
//   status st = execute_reshard(channel, *plan, &my_piece, &out, {.tag = 9, .timeout = 30s});
#pragma once

#include "graph/reshard.hpp"
#include "transport/collectives.hpp"

namespace cohort::transport {

/// `in`: this rank's source piece (null when it holds none); `out`: its destination piece
/// (null when it receives none), filled entirely (zeros where a Partial destination is empty).
status execute_reshard(channel& ch, const reshard_plan& plan, const tensor* in, tensor* out,
                       const collective_options& o);

}  // namespace cohort::transport
