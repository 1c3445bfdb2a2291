// The operations a graph is made of: one enumerator per op and one attribute struct per
// op family, held in a std::variant. Forward ops are what a model uses; the *_grad ops are
// what autodiff emits. Adding an op means: an enumerator here, a shape rule in
// shape_inference.cpp, a gradient rule in autodiff.cpp, a reference kernel, and a row in
// the dispatch tables of kernels/.
//
//   graph g;
//   var a = g.input("a", {4, 8}), b = g.input("b", {16, 8});
//   var c = g.apply1(op_kind::matmul, matmul_attrs{.trans_b = true}, {a, b});   // c = a @ b^T: [4,16]
//   const node& n = g.nodes().back();   // node{op_kind::matmul, matmul_attrs{.trans_b = true}, {a.id, b.id}, {c.id}}
//   assert(n.kind == op_kind::matmul && std::get<matmul_attrs>(n.attrs).trans_b);
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "graph/shape.hpp"

namespace cohort {

enum class op_kind : std::uint8_t {
  // -- forward ------------------------------------------------------------------------------
  matmul,  // (a [*,M,K], b [*,K,N] or [K,N]) -> [*,M,N]; transposes in attrs
  add,
  sub,
  mul,
  div,       // broadcasting elementwise (NumPy rules)
  bias_add,  // (x [*,N], b [N]) -> [*,N]
  scale,     // x * factor
  relu,
  gelu,
  tanh,  // gelu in the erf form, PyTorch's default
  softmax,
  log_softmax,            // over the last axis
  softmax_cross_entropy,  // (logits [*,C], labels i32 [*]) -> [] mean over rows
  mse,                    // (pred, target) same shape -> [] mean of squared differences
  layernorm,              // (x [*,C], gamma [C], beta [C]) -> [*,C], over the last axis
  embedding,              // (table [V,D], ids i32 [*]) -> [*,D]
  reshape,                // same elements, new shape
  permute,                // axes reordered (transpose is a permute)
  slice,                  // [start, end) along one axis
  concat,                 // n inputs joined along one axis
  sum,
  mean,             // over axes (all axes when none given)
  causal_mask,      // [*,T,T]: element (i,j) with j > i set to `fill`
  sum_to,           // reduce a broadcast result back to a smaller shape
  broadcast_to,     // stretch to a larger shape
  attention,        // (q [*,T,D], k [*,S,D], v [*,S,D]) -> softmax(q k^T scale (+ causal mask)) v [*,T,D],
                    // fused: the [*,T,S] scores are never a value of the graph (attention_attrs)
  embedding_bag,    // (table [V,D], ids i32 [*,L]) -> [*,D]: the sum (or mean) of each row's L looked-up
                    // rows; id -1 is padding (a bag of fewer than L ids), skipped (bag_attrs)
  pairwise_dot,     // (x [*,F,D]) -> [*,F(F-1)/2]: <x_i, x_j> for every pair i > j, row by row
                    // (DLRM's dot interaction without self-pairs, torch.tril_indices(F, F, -1) order)
  bce_with_logits,  // (logits, labels f32 in [0,1], same shape) -> [] mean binary cross-entropy of sigmoid
  // -- gradients (emitted by autodiff) ----------------------------------------------------
  relu_grad,                   // (dy, x) -> dx
  gelu_grad,                   // (dy, x) -> dx
  tanh_grad,                   // (dy, y) -> dx
  softmax_grad,                // (dy, y) -> dx
  log_softmax_grad,            // (dy, y) -> dx
  softmax_cross_entropy_grad,  // (dloss [], logits, labels) -> dlogits
  mse_grad,                    // (dloss [], pred, target) -> dpred
  layernorm_grad,              // (dy, x, gamma) -> (dx, dgamma, dbeta); layernorm's attrs
  embedding_grad,              // (dy [*,D], ids [*]) -> dtable [V,D]
  slice_grad,                  // dy -> zeros of the full shape with dy placed at [start,end)
  attention_grad,              // (dy, q, k, v, y) -> (dq, dk, dv); the scores recomputed; attention's attrs
  embedding_bag_grad,          // (dy [*,D], ids [*,L]) -> dtable [V,D]; bag_attrs with the table's shape
  embedding_bag_sparse_grad,   // (dy [*,D], ids [*,L]) -> (rows i32 [N], values [N,D]), N = ids' elements:
                               // entry i is id i's row (-1 for padding) and its bag's gradient share;
                               // the table's gradient is their sum by row (autodiff's sparse_tables)
  pairwise_dot_grad,           // (dy [*,P], x [*,F,D]) -> dx
  bce_with_logits_grad,        // (dloss [], logits, labels) -> dlogits
  // -- communication (inserted by partitioning; kernels come from the runtime) -------------
  allreduce,       // partial sums -> the whole value on every rank of the axis
  all_gather,      // shards along `dim` -> the whole value
  reduce_scatter,  // partial sums -> this rank's shard along `dim` of the whole value
  count_
};

constexpr int op_count = static_cast<int>(op_kind::count_);

const char* to_string(op_kind k);

struct no_attrs {
  friend bool operator==(const no_attrs&, const no_attrs&) = default;
};
struct matmul_attrs {
  bool trans_a = false;
  bool trans_b = false;
  friend bool operator==(const matmul_attrs&, const matmul_attrs&) = default;
};
struct scale_attrs {
  float factor = 1.f;
  friend bool operator==(const scale_attrs&, const scale_attrs&) = default;
};
struct layernorm_attrs {
  float eps = 1e-5f;
  friend bool operator==(const layernorm_attrs&, const layernorm_attrs&) = default;
};
/// reshape, sum_to, broadcast_to: the target shape. embedding_grad: the table shape.
struct shape_attrs {
  shape to;
  friend bool operator==(const shape_attrs&, const shape_attrs&) = default;
};
struct permute_attrs {
  std::vector<int> perm;
  friend bool operator==(const permute_attrs&, const permute_attrs&) = default;
};
/// slice: [start, end) along axis. slice_grad: the same, and `full` is the axis's extent.
struct slice_attrs {
  int axis = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t full = 0;
  friend bool operator==(const slice_attrs&, const slice_attrs&) = default;
};
struct concat_attrs {
  int axis = 0;
  friend bool operator==(const concat_attrs&, const concat_attrs&) = default;
};
/// sum, mean: normalized axes in increasing order; empty means every axis.
struct reduce_attrs {
  std::vector<int> axes;
  bool keepdim = false;
  friend bool operator==(const reduce_attrs&, const reduce_attrs&) = default;
};
/// Communication over mesh axis `axis`: `parts` ranks, this one at `index`; shards along
/// `dim` of a dimension whose whole extent is `extent`, in units of `granule`.
struct collective_attrs {
  std::string axis;
  int dim = 0;
  std::int64_t extent = 0;
  std::int64_t granule = 1;
  std::int64_t parts = 1;
  std::int64_t index = 0;
  int owner = -1;  // a shard's owner (shard::owner): the whole extent on that part, nothing on the others
  friend bool operator==(const collective_attrs&, const collective_attrs&) = default;
};
struct causal_mask_attrs {
  float fill = 0.f;
  friend bool operator==(const causal_mask_attrs&, const causal_mask_attrs&) = default;
};
/// attention, attention_grad: the scores' scale (1/sqrt(D) usually) and whether position t
/// sees only positions s <= t (then T == S).
struct attention_attrs {
  float scale = 1.f;
  bool causal = false;
  friend bool operator==(const attention_attrs&, const attention_attrs&) = default;
};

/// embedding_bag: sum or mean of the bag's rows (a mean over the ids that are not padding;
/// an empty bag gives zeros, as torch.nn.EmbeddingBag). embedding_bag_grad: the same, and
/// `table` is the table's shape.
/// A row shard (a table split by rows over tensor parallelism; set by partitioning): the
/// local table holds rows [first_row, first_row + its rows) of `all_rows`; an id of another
/// shard adds nothing here (the ranks' outputs are partial sums) but still counts in a mean's
/// divisor. all_rows == 0: the table is whole.
struct bag_attrs {
  bool mean = false;
  shape table;
  std::int64_t first_row = 0, all_rows = 0;
  friend bool operator==(const bag_attrs&, const bag_attrs&) = default;
};

/// The padding id of embedding_bag: a bag with fewer ids than the row's L fills the rest with it.
constexpr std::int32_t bag_padding = -1;

using op_attrs =
    std::variant<no_attrs, matmul_attrs, scale_attrs, layernorm_attrs, shape_attrs, permute_attrs, slice_attrs,
                 concat_attrs, reduce_attrs, causal_mask_attrs, collective_attrs, attention_attrs, bag_attrs>;

/// allreduce, all_gather, reduce_scatter: no kernel in kernels/; the runtime supplies them.
constexpr bool is_communication(op_kind k) {
  return k == op_kind::allreduce || k == op_kind::all_gather || k == op_kind::reduce_scatter;
}

}  // namespace cohort
