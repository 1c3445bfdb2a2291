// Reverse-mode automatic differentiation over the graph: appends, after the forward nodes,
// the nodes that compute d(loss)/d(parameter) for every parameter the loss depends on.
// The seed d(loss)/d(loss) is an input named "<loss>.grad" of shape [] that the executor
// fills (1 for a plain step; 1/m when m micro-batches accumulate into one step).
//
//   var loss = softmax_cross_entropy(logits, labels);
//   result<gradients> gr = autodiff(g, loss);
//   for (auto [param, grad] : gr->param_grads) ...   // grad is a value of g
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "graph/graph.hpp"

namespace cohort {

struct gradients {
  value_id loss = no_value;
  value_id seed = no_value;          // input [] holding d(loss)/d(loss)
  std::size_t backward_begin = 0;    // index of the first backward node
  /// (parameter, its gradient) for every parameter the loss depends on, in parameter order.
  std::vector<std::pair<value_id, value_id>> param_grads;
};

/// Appends the backward nodes of scalar `loss`. Errors: loss not a scalar, or an op on the
/// path has no gradient rule (gradients of gradients are not supported).
result<gradients> autodiff(graph& g, var loss);

}  // namespace cohort
