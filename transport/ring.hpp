// Internal helpers of the ring collectives: a rank's place in its ring and piece ranges.
#pragma once

#include <string>
#include <vector>

#include "graph/error.hpp"
#include "graph/placement.hpp"
#include "graph/tensor.hpp"
#include "transport/channel.hpp"

namespace cohort::transport::detail {

struct ring_position {
  int index = -1;  // this rank's position in the group
  int size = 0;
  int next = -1, prev = -1;  // global ranks of the neighbours
};

result<ring_position> locate(const channel& ch, const std::vector<int>& group, const char* what);

/// A contiguous copy of elements [r.begin, r.end) of a flat f32 buffer (what goes on the wire).
tensor copy_range(const tensor& flat, range r);

/// Adds context to a transport error: "allreduce step 2 (rank 3 <- 2): ..."
error in_step(const error& e, const char* what, int step, int me, int peer);

}  // namespace cohort::transport::detail
