// Reshard: moving a tensor from one distributed layout to another — any placements, and
// between meshes of different shapes and sizes (a 2x2 mesh to 3 ranks, after a failure).
// The plan is pure data: which rank sends which box of its local piece to which rank, and
// whether the receiver adds it (partial sums) or places it. transport/ executes it.
//
// How: of the source ranks only those at coordinate 0 of every Replicate axis contribute
// (the others hold copies); their pieces do not overlap except along Partial axes, where
// they must be summed, so every destination piece is the sum of its intersections with the
// contributing source pieces. A Partial destination is written on the ranks at coordinate 0
// of its Partial axes; the other ranks of those axes hold zeros (a valid decomposition).
//
//   layout from{process_mesh({{"x", 2}, {"y", 2}}), {shard{0}, partial{}}, {0, 1, 2, 3}};
//   layout to{process_mesh({{"x", 3}}), {shard{1}}, {0, 1, 2}};
//   auto plan = plan_reshard({6, 5}, from, to);
//   if (!plan) return plan.error();
//   for (const reshard_message& m : plan->messages)   // from rank, to rank, box in each's piece, add
//     assert(m.from_box.extent() == m.to_box.extent());
#pragma once

#include <cstdint>
#include <vector>

#include "graph/error.hpp"
#include "graph/mesh.hpp"
#include "graph/placement.hpp"
#include "graph/shape.hpp"

namespace cohort {

/// A tensor's distribution: a mesh, a placement per mesh axis, and the global rank of each
/// mesh position (row-major); empty `ranks` means 0..n-1.
struct layout {
  process_mesh mesh;
  std::vector<placement> placements;
  std::vector<int> ranks;
  int global_rank(int mesh_rank) const {
    return ranks.empty() ? mesh_rank : ranks[static_cast<std::size_t>(mesh_rank)];
  }
};

/// [begin, end) per dimension.
struct box {
  std::vector<range> dims;
  bool empty() const;
  shape extent() const;
};

/// The box of the global tensor a mesh position holds (whole along non-sharded axes).
box local_box(const shape& global, const layout& l, int mesh_rank);
/// Whether a mesh position contributes (coordinate 0 on every Replicate axis).
bool contributes(const layout& l, int mesh_rank);
/// Whether a position holds the value on a Partial destination (coordinate 0 on every Partial axis).
bool holds_partial_value(const layout& l, int mesh_rank);

struct reshard_message {
  int from = 0, to = 0;  // global ranks
  box from_box, to_box;  // in the sender's and the receiver's local coordinates
  bool add = false;      // receiver accumulates (several partial pieces of one region)
};

struct reshard_plan {
  shape global;
  layout from, to;
  std::vector<reshard_message> messages;
};

/// Errors: a placement count that does not match its mesh, a shard of a missing dimension.
result<reshard_plan> plan_reshard(const shape& global, const layout& from, const layout& to);

}  // namespace cohort
