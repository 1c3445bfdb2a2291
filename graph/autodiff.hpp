// Reverse-mode automatic differentiation over the graph: appends, after the forward nodes,
// the nodes that compute d(loss)/d(parameter) for every parameter the loss depends on.
// The seed d(loss)/d(loss) is an input named "<loss>.grad" of shape [] that the executor
// fills (1 for a plain step; 1/m when m micro-batches accumulate into one step).
//
//   graph g;
//   var logits = linear(g.input("x", {32, 64}), 10, "fc");
//   var loss = softmax_cross_entropy(logits, g.input("y", {32}, dtype::i32));
//   result<gradients> gr = autodiff(g, loss);
//   if (!gr) return gr.error();                      // loss not a scalar, an op without a gradient rule
//   for (auto [param, grad] : gr->param_grads)       // fc.weight and fc.bias, in parameter order
//     assert(g.value(grad).type.shape == g.value(param).type.shape);
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "graph/graph.hpp"

namespace cohort {

struct gradients {
  value_id loss = no_value;
  value_id seed = no_value;        // input [] holding d(loss)/d(loss)
  std::size_t backward_begin = 0;  // index of the first backward node
  /// (parameter, its gradient) for every parameter the loss depends on, in parameter order.
  std::vector<std::pair<value_id, value_id>> param_grads;
  /// With autodiff_options::sparse_tables: the tables whose gradient is kept as entries
  /// (rows [N] i32, -1 for none; values [N,D]) whose sum by row is the dense gradient. Such
  /// a parameter is not in param_grads.
  /// With autodiff_options::fused_tables no entries are computed: rows and values are
  /// no_value, and the caller sums the bag's output gradient `output_grad` [B,D] by the ids
  /// `ids` [B,L] itself (row_sums::add_bags), a mean's share divided by its bag's count.
  struct sparse_grad {
    value_id param = no_value, rows = no_value, values = no_value;
    value_id output_grad = no_value, ids = no_value;
    bool mean = false;
  };
  std::vector<sparse_grad> sparse_grads;
};

struct autodiff_options {
  /// A parameter table read only by one embedding_bag gets a sparse gradient (the touched
  /// rows, never a dense [V,D] table): sparse_grads instead of param_grads.
  bool sparse_tables = false;
  /// With sparse_tables: no entries node either; the caller sums the bag's output gradient by
  /// its ids (sparse_grad::output_grad, ids) and updates the rows in the same pass.
  bool fused_tables = false;
};

/// Appends the backward nodes of scalar `loss`. Errors: loss not a scalar, or an op on the
/// path has no gradient rule (gradients of gradients are not supported).
result<gradients> autodiff(graph& g, var loss, autodiff_options opts = {});

}  // namespace cohort
