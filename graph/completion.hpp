// Completion: from the placements a model annotated (usually a few weights), the placement
// of every value of the graph on one mesh axis — forward, backward and parameter gradients
// — by a per-op rule applied in graph order. Where an op needs an operand in a placement it
// does not have, the rule says so, and partitioning inserts the communication (P -> R is an
// allreduce, S -> R an all-gather, P -> S a reduce-scatter, R -> S a local slice).
//
// For Megatron's layout it is enough to annotate the weights: column-parallel W1 = S(1),
// row-parallel W2 = S(0). Completion then gives h = x @ W1 : S(last), gelu(h) : S(last),
// y = h @ W2 : P, an allreduce before the replicated bias, and in the backward pass the
// allreduce of dx, and dW1 : S(1), dW2 : S(0).
//
//   graph g;
//   var x = g.input("x", {8, 16});
//   var h = linear(x, 64, "fc1", /*bias=*/true, tp_style::column);   // annotates W1 = S(1), b1 = S(0)
//   var y = linear(gelu(h), 16, "fc2", true, tp_style::row);          // annotates W2 = S(0)
//   auto c = complete_axis(g, "tp", /*degree=*/2);
//   if (!c) return c.error();
//   assert(to_string(c->placement_of(h.id)) == "S(1)");
//   std::size_t last = g.nodes().size() - 1;                          // fc2's bias_add, producing y
//   assert(is_partial(c->placement_of(g.nodes()[last].inputs[0])));   // h @ W2 is a partial sum
//   assert(is_replicate(c->required[last][0]));                       // the bias needs it whole: an allreduce
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/autodiff.hpp"
#include "graph/graph.hpp"
#include "graph/placement.hpp"

namespace cohort {

struct axis_completion {
  std::string axis;
  std::int64_t degree = 1;
  std::vector<placement> values;                 // by value id: what each value is
  std::vector<std::vector<placement>> required;  // by node, by operand: what the op reads
  const placement& placement_of(value_id id) const { return values[static_cast<std::size_t>(id)]; }
  /// Operands whose placement has to change before their op (communication or slices).
  std::size_t reshards = 0;
};

/// Completes placements on mesh axis `axis` of size `degree`. Inputs are replicated unless
/// annotated; parameters take their annotation (default replicated). Errors: an annotation
/// that cannot hold (a shard of an extent smaller than the degree, a granule that does not
/// divide the extent, a dimension out of range), naming the value.
result<axis_completion> complete_axis(const graph& g, const std::string& axis, std::int64_t degree);

/// The placement a parameter's gradient must end in: its parameter's. Returns the pairs
/// (gradient value, placement) whose completed placement differs (partitioning reshards them).
std::vector<std::pair<value_id, placement>> gradient_fixups(const graph& g, const gradients& gr,
                                                            const axis_completion& c);

}  // namespace cohort
