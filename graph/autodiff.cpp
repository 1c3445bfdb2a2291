// Gradient rules, one per forward op, applied in reverse build order.
#include "graph/autodiff.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "graph/dsl.hpp"

namespace cohort {
namespace {

class backward_pass {
 public:
  backward_pass(graph& g, autodiff_options opts) : g_(g), opts_(opts) {}

  void accumulate(value_id id, var grad) {
    if (!grad.valid()) return;
    auto it = grads_.find(id);
    if (it == grads_.end())
      grads_.emplace(id, grad);
    else
      it->second = add(it->second, grad);
  }
  var grad_of(value_id id) const {
    auto it = grads_.find(id);
    return it == grads_.end() ? var{} : it->second;
  }
  bool wants(value_id id) const { return g_.value(id).requires_grad; }
  var v(value_id id) { return g_.handle(id); }
  const shape& shape_of(value_id id) const { return g_.value(id).type.shape; }

  /// dy reduced to the shape of operand `id` (identity when shapes already agree).
  var reduce_to(var dy, value_id id) {
    if (dy.shape() == shape_of(id)) return dy;
    return sum_to(dy, shape_of(id));
  }

  status apply_rule(const node& n);
  const std::vector<gradients::sparse_grad>& sparse() const { return sparse_; }

 private:
  status apply_matmul(const node& n, var dc);
  // A parameter no forward node but `reader` reads.
  bool only_read_by(value_id param, const node& reader) const;

  graph& g_;
  autodiff_options opts_;
  std::unordered_map<value_id, var> grads_;
  std::vector<gradients::sparse_grad> sparse_;
};

bool backward_pass::only_read_by(value_id param, const node& reader) const {
  if (g_.value(param).kind != value_kind::parameter) return false;
  int reads = 0;
  for (const node& n : g_.nodes()) {
    if (n.origin >= 0) break;  // the backward nodes start here
    for (auto in : n.inputs) reads += in == param ? 1 : 0;
  }
  return reads == 1 && std::count(reader.inputs.begin(), reader.inputs.end(), param) == 1;
}

status backward_pass::apply_matmul(const node& n, var dc) {
  const auto& at = std::get<matmul_attrs>(n.attrs);
  value_id a = n.inputs[0], b = n.inputs[1];
  bool ta = at.trans_a, tb = at.trans_b;
  bool b_broadcast = shape_of(b).rank() == 2 && shape_of(a).rank() > 2;
  if (wants(a)) {
    // C = op(A) op(B): d op(A) = dC op(B)^T, and dA = (d op(A))^T when A is transposed.
    if (!ta)
      accumulate(a, matmul(dc, v(b), false, !tb));
    else if (b_broadcast)
      accumulate(a, transpose(matmul(dc, v(b), false, !tb), -1, -2));
    else
      accumulate(a, matmul(v(b), dc, tb, true));  // (dC op(B)^T)^T in one GEMM
  }
  if (wants(b)) {
    if (!b_broadcast) {
      var db = tb ? matmul(dc, v(a), true, ta) : matmul(v(a), dc, !ta, false);
      accumulate(b, db);
    } else if (!ta) {
      // A [*,M,K] against a shared B: flatten the batch into rows, one GEMM.
      std::int64_t k = shape_of(a).at(-1), nn = dc.shape().at(-1);
      var a2 = reshape(v(a), {-1, k});
      var dc2 = reshape(dc, {-1, nn});
      accumulate(b, tb ? matmul(dc2, a2, true, false) : matmul(a2, dc2, true, false));
    } else {
      // A [*,K,M] transposed against a shared B: per-batch products summed over the batch.
      var per = tb ? matmul(dc, v(a), true, true) : matmul(v(a), dc, false, false);
      std::vector<int> batch_axes;
      for (int i = 0; i < per.shape().rank() - 2; ++i) batch_axes.push_back(i);
      accumulate(b, sum(per, batch_axes));
    }
  }
  return {};
}

status backward_pass::apply_rule(const node& n) {
  using k = op_kind;
  var dy = grad_of(n.outputs[0]);
  if (!dy.valid()) return {};
  auto in = [&](std::size_t i) { return v(n.inputs[i]); };
  auto want = [&](std::size_t i) { return wants(n.inputs[i]); };
  switch (n.kind) {
    case k::matmul:
      return apply_matmul(n, dy);
    case k::add:
      if (want(0)) accumulate(n.inputs[0], reduce_to(dy, n.inputs[0]));
      if (want(1)) accumulate(n.inputs[1], reduce_to(dy, n.inputs[1]));
      return {};
    case k::sub:
      if (want(0)) accumulate(n.inputs[0], reduce_to(dy, n.inputs[0]));
      if (want(1)) accumulate(n.inputs[1], scale(reduce_to(dy, n.inputs[1]), -1.f));
      return {};
    case k::mul:
      if (want(0)) accumulate(n.inputs[0], reduce_to(mul(dy, in(1)), n.inputs[0]));
      if (want(1)) accumulate(n.inputs[1], reduce_to(mul(dy, in(0)), n.inputs[1]));
      return {};
    case k::div:
      if (want(0)) accumulate(n.inputs[0], reduce_to(div(dy, in(1)), n.inputs[0]));
      if (want(1))  // d(a/b)/db = -(a/b)/b
        accumulate(n.inputs[1], scale(reduce_to(div(mul(dy, v(n.outputs[0])), in(1)), n.inputs[1]), -1.f));
      return {};
    case k::bias_add:
      if (want(0)) accumulate(n.inputs[0], dy);
      if (want(1)) accumulate(n.inputs[1], sum_to(dy, shape_of(n.inputs[1])));
      return {};
    case k::scale:
      accumulate(n.inputs[0], scale(dy, std::get<scale_attrs>(n.attrs).factor));
      return {};
    case k::relu:
      accumulate(n.inputs[0], g_.apply1(k::relu_grad, no_attrs{}, {dy, in(0)}));
      return {};
    case k::gelu:
      accumulate(n.inputs[0], g_.apply1(k::gelu_grad, no_attrs{}, {dy, in(0)}));
      return {};
    case k::tanh:
      accumulate(n.inputs[0], g_.apply1(k::tanh_grad, no_attrs{}, {dy, v(n.outputs[0])}));
      return {};
    case k::softmax:
      accumulate(n.inputs[0], g_.apply1(k::softmax_grad, no_attrs{}, {dy, v(n.outputs[0])}));
      return {};
    case k::log_softmax:
      accumulate(n.inputs[0], g_.apply1(k::log_softmax_grad, no_attrs{}, {dy, v(n.outputs[0])}));
      return {};
    case k::softmax_cross_entropy:
      if (want(0)) accumulate(n.inputs[0], g_.apply1(k::softmax_cross_entropy_grad, no_attrs{}, {dy, in(0), in(1)}));
      return {};
    case k::mse: {
      var dpred = g_.apply1(k::mse_grad, no_attrs{}, {dy, in(0), in(1)});
      if (want(0)) accumulate(n.inputs[0], dpred);
      if (want(1)) accumulate(n.inputs[1], scale(dpred, -1.f));
      return {};
    }
    case k::layernorm: {
      auto outs = g_.apply(k::layernorm_grad, n.attrs, {dy, in(0), in(1)});
      if (outs.size() != 3) return {};  // error recorded in the graph
      if (want(0)) accumulate(n.inputs[0], outs[0]);
      if (want(1)) accumulate(n.inputs[1], outs[1]);
      if (want(2)) accumulate(n.inputs[2], outs[2]);
      return {};
    }
    case k::attention: {
      auto outs = g_.apply(k::attention_grad, n.attrs, {dy, in(0), in(1), in(2), v(n.outputs[0])});
      if (outs.size() != 3) return {};  // error recorded in the graph
      for (std::size_t i = 0; i < 3; ++i)
        if (want(i)) accumulate(n.inputs[i], outs[i]);
      return {};
    }
    case k::embedding_bag:
      if (want(0)) {
        bag_attrs a = std::get<bag_attrs>(n.attrs);
        a.table = shape_of(n.inputs[0]);
        if (opts_.sparse_tables && only_read_by(n.inputs[0], n)) {
          if (opts_.fused_tables) {
            sparse_.push_back({.param = n.inputs[0], .output_grad = dy.id, .ids = n.inputs[1], .mean = a.mean});
          } else {
            auto outs = g_.apply(k::embedding_bag_sparse_grad, a, {dy, in(1)});
            if (outs.size() == 2) sparse_.push_back({n.inputs[0], outs[0].id, outs[1].id});
          }
        } else {
          accumulate(n.inputs[0], g_.apply1(k::embedding_bag_grad, a, {dy, in(1)}));
        }
      }
      return {};
    case k::pairwise_dot:
      if (want(0)) accumulate(n.inputs[0], g_.apply1(k::pairwise_dot_grad, no_attrs{}, {dy, in(0)}));
      return {};
    case k::bce_with_logits:
      if (want(0)) accumulate(n.inputs[0], g_.apply1(k::bce_with_logits_grad, no_attrs{}, {dy, in(0), in(1)}));
      if (want(1))
        g_.fail(make_error(errc::invalid_argument,
                           "bce_with_logits: labels are data; no gradient flows to them (make them an input)"));
      return {};
    case k::embedding:
      if (want(0))
        accumulate(n.inputs[0], g_.apply1(k::embedding_grad, shape_attrs{shape_of(n.inputs[0])}, {dy, in(1)}));
      return {};
    case k::reshape:
      accumulate(n.inputs[0], reshape(dy, shape_of(n.inputs[0])));
      return {};
    case k::permute: {
      const auto& perm = std::get<permute_attrs>(n.attrs).perm;
      std::vector<int> inverse(perm.size());
      for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
      accumulate(n.inputs[0], permute(dy, inverse));
      return {};
    }
    case k::slice: {
      auto a = std::get<slice_attrs>(n.attrs);
      a.full = shape_of(n.inputs[0])[a.axis];
      accumulate(n.inputs[0], g_.apply1(k::slice_grad, a, {dy}));
      return {};
    }
    case k::concat: {
      int axis = std::get<concat_attrs>(n.attrs).axis;
      std::int64_t offset = 0;
      for (std::size_t i = 0; i < n.inputs.size(); ++i) {
        std::int64_t extent = shape_of(n.inputs[i])[axis];
        if (want(i)) accumulate(n.inputs[i], slice(dy, axis, offset, offset + extent));
        offset += extent;
      }
      return {};
    }
    case k::sum:
    case k::mean: {
      const auto& a = std::get<reduce_attrs>(n.attrs);
      const shape& xs = shape_of(n.inputs[0]);
      shape kept = xs;
      std::int64_t count = 1;
      for (int ax : a.axes) {
        kept[ax] = 1;
        count *= xs[ax];
      }
      var g = broadcast_to(reshape(dy, kept), xs);
      if (n.kind == k::mean) g = scale(g, 1.f / static_cast<float>(count));
      accumulate(n.inputs[0], g);
      return {};
    }
    case k::causal_mask:
      accumulate(n.inputs[0], causal_mask(dy, 0.f));
      return {};
    case k::sum_to:
      accumulate(n.inputs[0], broadcast_to(dy, shape_of(n.inputs[0])));
      return {};
    case k::broadcast_to:
      accumulate(n.inputs[0], sum_to(dy, shape_of(n.inputs[0])));
      return {};
    default:
      return make_error(errc::unsupported, std::string("autodiff: no gradient rule for ") + to_string(n.kind) +
                                               " (gradients of gradients are not supported)");
  }
}

}  // namespace

result<gradients> autodiff(graph& g, var loss, autodiff_options opts) {
  if (auto st = g.check(); !st) return st.error();
  if (!loss.valid() || loss.g != &g)
    return make_error(errc::invalid_argument, "autodiff: loss is not a value of this graph");
  if (loss.shape().rank() != 0)
    return make_error(errc::shape_mismatch, "autodiff: loss must be a scalar [], got " + loss.shape().to_string());
  gradients out;
  out.loss = loss.id;
  std::size_t forward_end = g.nodes().size();
  var seed = g.input("loss.grad", shape{}, dtype::f32);
  if (auto st = g.check(); !st) return st.error();
  out.seed = seed.id;
  out.backward_begin = forward_end;

  backward_pass pass(g, opts);
  pass.accumulate(loss.id, seed);
  for (std::size_t i = forward_end; i-- > 0;) {
    node n = g.nodes()[i];  // copy: apply_rule appends to the node list
    bool any_input_wants = false;
    for (auto id : n.inputs) any_input_wants = any_input_wants || g.value(id).requires_grad;
    if (!any_input_wants) continue;
    g.set_origin(static_cast<std::int32_t>(i));
    auto st = pass.apply_rule(n);
    g.set_origin(-1);
    if (!st) return st.error();
    if (auto st = g.check(); !st) return st.error();
  }
  for (value_id p : g.parameters()) {
    var grad = pass.grad_of(p);
    if (grad.valid()) out.param_grads.emplace_back(p, grad.id);
  }
  out.sparse_grads = pass.sparse();
  return out;
}

}  // namespace cohort
