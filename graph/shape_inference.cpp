// Shape and dtype rules, one case per op.
#include "graph/shape_inference.hpp"

#include <algorithm>
#include <string>

#include "graph/placement.hpp"

namespace cohort {
namespace {

using types = std::vector<value_type>;

std::string describe(std::span<const value_type> in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (i > 0) out += ", ";
    out += in[i].shape.to_string();
    if (in[i].type != dtype::f32) out += std::string(" ") + to_string(in[i].type);
  }
  return out;
}

error shape_error(op_kind k, std::span<const value_type> in, const std::string& why) {
  return make_error(errc::shape_mismatch, std::string(to_string(k)) + ": " + why + " (operands: " + describe(in) + ")");
}

// Checks operand count and that each operand has the expected dtype (f32 unless listed).
result<bool> check_operands(op_kind k, std::span<const value_type> in, std::size_t count,
                            std::initializer_list<std::size_t> int_operands = {}) {
  if (in.size() != count)
    return make_error(errc::invalid_argument, std::string(to_string(k)) + ": expected " + std::to_string(count) +
                                                  " operands, got " + std::to_string(in.size()));
  for (std::size_t i = 0; i < in.size(); ++i) {
    bool want_int = std::find(int_operands.begin(), int_operands.end(), i) != int_operands.end();
    dtype want = want_int ? dtype::i32 : dtype::f32;
    if (in[i].type != want)
      return make_error(errc::dtype_mismatch, std::string(to_string(k)) + ": operand " + std::to_string(i) +
                                                  " must be " + to_string(want) + ", got " + to_string(in[i].type) +
                                                  " (operands: " + describe(in) + ")");
  }
  return true;
}

shape without_last(const shape& s) {
  std::vector<std::int64_t> d = s.dims();
  d.pop_back();
  return shape(std::move(d));
}

result<types> infer_matmul(const matmul_attrs& a, std::span<const value_type> in) {
  const shape& x = in[0].shape;
  const shape& y = in[1].shape;
  if (x.rank() < 2 || y.rank() < 2) return shape_error(op_kind::matmul, in, "operands need rank >= 2");
  std::int64_t m = a.trans_a ? x.at(-1) : x.at(-2);
  std::int64_t k1 = a.trans_a ? x.at(-2) : x.at(-1);
  std::int64_t k2 = a.trans_b ? y.at(-1) : y.at(-2);
  std::int64_t n = a.trans_b ? y.at(-2) : y.at(-1);
  if (k1 != k2)
    return make_error(errc::shape_mismatch, "matmul: inner extents differ: a " + x.to_string() +
                                                " (K=" + std::to_string(k1) + ") @ b " + y.to_string() +
                                                " (K=" + std::to_string(k2) + ")");
  std::vector<std::int64_t> batch(x.dims().begin(), x.dims().end() - 2);
  if (y.rank() > 2) {
    std::vector<std::int64_t> ybatch(y.dims().begin(), y.dims().end() - 2);
    if (ybatch != batch) return shape_error(op_kind::matmul, in, "batch extents must be equal, or b must have rank 2");
  }
  batch.push_back(m);
  batch.push_back(n);
  return types{{shape(std::move(batch)), dtype::f32}};
}

result<types> infer_reduce(op_kind k, reduce_attrs& a, std::span<const value_type> in) {
  const shape& x = in[0].shape;
  std::vector<int> axes;
  for (int ax : a.axes) {
    auto r = normalize_axis(ax, x.rank(), to_string(k));
    if (!r) return r.error();
    axes.push_back(*r);
  }
  if (axes.empty())
    for (int i = 0; i < x.rank(); ++i) axes.push_back(i);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return make_error(errc::invalid_argument, std::string(to_string(k)) + ": repeated axis");
  a.axes = axes;
  std::vector<std::int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (!reduced)
      dims.push_back(x[i]);
    else if (a.keepdim)
      dims.push_back(1);
  }
  return types{{shape(std::move(dims)), dtype::f32}};
}

result<types> infer_reshape(shape_attrs& a, std::span<const value_type> in) {
  std::vector<std::int64_t> dims = a.to.dims();
  int unknown = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown >= 0) return shape_error(op_kind::reshape, in, "more than one -1 extent");
      unknown = static_cast<int>(i);
    } else if (dims[i] < 0) {
      return shape_error(op_kind::reshape, in, "negative extent in " + a.to.to_string());
    } else {
      known *= dims[i];
    }
  }
  std::int64_t n = in[0].shape.numel();
  if (unknown >= 0) {
    if (known == 0 || n % known != 0)
      return shape_error(op_kind::reshape, in, "cannot infer -1 in " + a.to.to_string());
    dims[static_cast<std::size_t>(unknown)] = n / known;
  }
  shape to(std::move(dims));
  if (to.numel() != n)
    return shape_error(op_kind::reshape, in,
                       "element count differs: " + std::to_string(n) + " vs target " + to.to_string() + " (" +
                           std::to_string(to.numel()) + ")");
  a.to = to;
  return types{{to, in[0].type}};
}

result<types> infer_permute(permute_attrs& a, std::span<const value_type> in) {
  const shape& x = in[0].shape;
  if (static_cast<int>(a.perm.size()) != x.rank())
    return shape_error(op_kind::permute, in, "permutation has " + std::to_string(a.perm.size()) + " axes");
  std::vector<int> seen(a.perm.size(), 0);
  std::vector<std::int64_t> dims;
  for (int& p : a.perm) {
    auto r = normalize_axis(p, x.rank(), "permute");
    if (!r) return r.error();
    p = *r;
    if (seen[static_cast<std::size_t>(p)]++) return shape_error(op_kind::permute, in, "axis repeated");
    dims.push_back(x[p]);
  }
  return types{{shape(std::move(dims)), in[0].type}};
}

result<types> infer_slice(op_kind k, slice_attrs& a, std::span<const value_type> in) {
  const shape& x = in[0].shape;
  auto ax = normalize_axis(a.axis, x.rank(), to_string(k));
  if (!ax) return ax.error();
  a.axis = *ax;
  std::int64_t extent = k == op_kind::slice ? x[a.axis] : a.full;
  if (a.start < 0 || a.end > extent || a.start > a.end)  // empty: a table-wise shard's other ranks
    return shape_error(k, in,
                       "range [" + std::to_string(a.start) + "," + std::to_string(a.end) + ") invalid for extent " +
                           std::to_string(extent) + " of axis " + std::to_string(a.axis));
  shape out = x;
  if (k == op_kind::slice) {
    out[a.axis] = a.end - a.start;
  } else {
    if (x[a.axis] != a.end - a.start) return shape_error(k, in, "gradient extent does not match the slice");
    out[a.axis] = a.full;
  }
  return types{{out, in[0].type}};
}

result<types> infer_concat(concat_attrs& a, std::span<const value_type> in) {
  if (in.empty()) return make_error(errc::invalid_argument, "concat: no operands");
  const shape& first = in[0].shape;
  auto ax = normalize_axis(a.axis, first.rank(), "concat");
  if (!ax) return ax.error();
  a.axis = *ax;
  shape out = first;
  out[a.axis] = 0;
  for (const auto& v : in) {
    if (v.type != in[0].type) return shape_error(op_kind::concat, in, "element types differ");
    if (v.shape.rank() != first.rank()) return shape_error(op_kind::concat, in, "ranks differ");
    for (int d = 0; d < first.rank(); ++d)
      if (d != a.axis && v.shape[d] != first[d])
        return shape_error(op_kind::concat, in, "extents differ on axis " + std::to_string(d));
    out[a.axis] += v.shape[a.axis];
  }
  return types{{out, in[0].type}};
}

bool broadcasts_to(const shape& small, const shape& big) {
  auto r = broadcast_shapes(small, big, "");
  return r && *r == big;
}

}  // namespace

result<std::vector<value_type>> infer_shapes(op_kind kind, op_attrs& attrs, std::span<const value_type> in) {
  using k = op_kind;
  auto same_as_first = [&](std::size_t count) -> result<types> {
    if (auto c = check_operands(kind, in, count); !c) return c.error();
    for (std::size_t i = 1; i < in.size(); ++i)
      if (in[i].shape != in[0].shape) return shape_error(kind, in, "shapes must be equal");
    return types{in[0]};
  };
  switch (kind) {
    case k::matmul: {
      if (auto c = check_operands(kind, in, 2); !c) return c.error();
      return infer_matmul(std::get<matmul_attrs>(attrs), in);
    }
    case k::add:
    case k::sub:
    case k::mul:
    case k::div: {
      if (auto c = check_operands(kind, in, 2); !c) return c.error();
      auto s = broadcast_shapes(in[0].shape, in[1].shape, to_string(kind));
      if (!s) return shape_error(kind, in, "shapes do not broadcast");
      return types{{*s, dtype::f32}};
    }
    case k::bias_add: {
      if (auto c = check_operands(kind, in, 2); !c) return c.error();
      if (in[0].shape.rank() < 1 || in[1].shape.rank() != 1 || in[1].shape[0] != in[0].shape.at(-1))
        return shape_error(kind, in, "bias must be [N] where x is [*,N]");
      return types{in[0]};
    }
    case k::scale:
    case k::relu:
    case k::gelu:
    case k::tanh:
      return same_as_first(1);
    case k::softmax:
    case k::log_softmax:
      if (!in.empty() && in[0].shape.rank() < 1) return shape_error(kind, in, "needs rank >= 1");
      return same_as_first(1);
    case k::softmax_cross_entropy: {
      if (auto c = check_operands(kind, in, 2, {1}); !c) return c.error();
      if (in[0].shape.rank() < 1 || without_last(in[0].shape) != in[1].shape)
        return shape_error(kind, in, "labels must have the logits' shape without the class axis");
      return types{{shape{}, dtype::f32}};
    }
    case k::mse: {
      if (auto r = same_as_first(2); !r) return r.error();
      return types{{shape{}, dtype::f32}};
    }
    case k::layernorm: {
      if (auto c = check_operands(kind, in, 3); !c) return c.error();
      shape c_shape{in[0].shape.rank() > 0 ? in[0].shape.at(-1) : 0};
      if (in[0].shape.rank() < 1 || in[1].shape != c_shape || in[2].shape != c_shape)
        return shape_error(kind, in, "gamma and beta must be [C] where x is [*,C]");
      return types{in[0]};
    }
    case k::embedding: {
      if (auto c = check_operands(kind, in, 2, {1}); !c) return c.error();
      if (in[0].shape.rank() != 2) return shape_error(kind, in, "table must be [V,D]");
      std::vector<std::int64_t> dims = in[1].shape.dims();
      dims.push_back(in[0].shape[1]);
      return types{{shape(std::move(dims)), dtype::f32}};
    }
    case k::embedding_bag: {
      if (auto c = check_operands(kind, in, 2, {1}); !c) return c.error();
      if (in[0].shape.rank() != 2) return shape_error(kind, in, "table must be [V,D]");
      if (in[1].shape.rank() < 1) return shape_error(kind, in, "ids must be [*,L]");
      std::vector<std::int64_t> dims = without_last(in[1].shape).dims();
      dims.push_back(in[0].shape[1]);
      return types{{shape(std::move(dims)), dtype::f32}};
    }
    case k::pairwise_dot: {
      if (auto c = check_operands(kind, in, 1); !c) return c.error();
      if (in[0].shape.rank() < 2 || in[0].shape.at(-2) < 2) return shape_error(kind, in, "needs x [*,F,D] with F >= 2");
      const std::int64_t f = in[0].shape.at(-2);
      std::vector<std::int64_t> dims = without_last(without_last(in[0].shape)).dims();
      dims.push_back(f * (f - 1) / 2);
      return types{{shape(std::move(dims)), dtype::f32}};
    }
    case k::bce_with_logits: {
      if (auto r = same_as_first(2); !r) return r.error();
      return types{{shape{}, dtype::f32}};
    }
    case k::reshape:
      if (in.size() != 1) return make_error(errc::invalid_argument, "reshape: expected 1 operand");
      return infer_reshape(std::get<shape_attrs>(attrs), in);
    case k::permute:
      if (in.size() != 1) return make_error(errc::invalid_argument, "permute: expected 1 operand");
      return infer_permute(std::get<permute_attrs>(attrs), in);
    case k::slice:
    case k::slice_grad:
      if (in.size() != 1) return make_error(errc::invalid_argument, "slice: expected 1 operand");
      return infer_slice(kind, std::get<slice_attrs>(attrs), in);
    case k::concat:
      return infer_concat(std::get<concat_attrs>(attrs), in);
    case k::sum:
    case k::mean:
      if (auto c = check_operands(kind, in, 1); !c) return c.error();
      return infer_reduce(kind, std::get<reduce_attrs>(attrs), in);
    case k::causal_mask: {
      if (auto c = check_operands(kind, in, 1); !c) return c.error();
      const shape& x = in[0].shape;
      if (x.rank() < 2 || x.at(-1) != x.at(-2)) return shape_error(kind, in, "needs [*,T,T]");
      return types{in[0]};
    }
    case k::attention: {
      if (auto c = check_operands(kind, in, 3); !c) return c.error();
      const shape &q = in[0].shape, &kk = in[1].shape, &v = in[2].shape;
      if (q.rank() < 2 || kk != v || kk.rank() != q.rank() || kk.at(-1) != q.at(-1) ||
          without_last(without_last(q)) != without_last(without_last(kk)))
        return shape_error(kind, in, "needs q [*,T,D], k and v [*,S,D]");
      if (std::get<attention_attrs>(attrs).causal && q.at(-2) != kk.at(-2))
        return shape_error(kind, in, "causal attention needs as many keys as queries");
      return types{in[0]};
    }
    case k::sum_to: {
      if (auto c = check_operands(kind, in, 1); !c) return c.error();
      const shape& to = std::get<shape_attrs>(attrs).to;
      if (!broadcasts_to(to, in[0].shape))
        return shape_error(kind, in, "target " + to.to_string() + " does not broadcast to the operand");
      return types{{to, dtype::f32}};
    }
    case k::broadcast_to: {
      if (auto c = check_operands(kind, in, 1); !c) return c.error();
      const shape& to = std::get<shape_attrs>(attrs).to;
      if (!broadcasts_to(in[0].shape, to))
        return shape_error(kind, in, "operand does not broadcast to " + to.to_string());
      return types{{to, dtype::f32}};
    }
    case k::relu_grad:
    case k::gelu_grad:
    case k::tanh_grad:
    case k::softmax_grad:
    case k::log_softmax_grad:
      return same_as_first(2);
    case k::softmax_cross_entropy_grad: {
      if (auto c = check_operands(kind, in, 3, {2}); !c) return c.error();
      if (in[0].shape.rank() != 0 || in[1].shape.rank() < 1 || without_last(in[1].shape) != in[2].shape)
        return shape_error(kind, in, "expects (dloss [], logits [*,C], labels [*])");
      return types{in[1]};
    }
    case k::mse_grad: {
      if (auto c = check_operands(kind, in, 3); !c) return c.error();
      if (in[0].shape.rank() != 0 || in[1].shape != in[2].shape)
        return shape_error(kind, in, "expects (dloss [], pred, target) with equal shapes");
      return types{in[1]};
    }
    case k::layernorm_grad: {
      if (auto c = check_operands(kind, in, 3); !c) return c.error();
      if (in[0].shape != in[1].shape || in[1].shape.rank() < 1 || in[2].shape != shape{in[1].shape.at(-1)})
        return shape_error(kind, in, "expects (dy [*,C], x [*,C], gamma [C])");
      return types{in[1], in[2], in[2]};
    }
    case k::attention_grad: {
      if (auto c = check_operands(kind, in, 5); !c) return c.error();
      if (in[0].shape != in[1].shape || in[4].shape != in[1].shape || in[2].shape != in[3].shape ||
          in[1].shape.rank() < 2 || in[2].shape.rank() != in[1].shape.rank() ||
          in[2].shape.at(-1) != in[1].shape.at(-1))
        return shape_error(kind, in, "expects (dy, q [*,T,D], k [*,S,D], v [*,S,D], y [*,T,D])");
      return types{in[1], in[2], in[3]};
    }
    case k::embedding_bag_grad: {
      if (auto c = check_operands(kind, in, 2, {1}); !c) return c.error();
      const shape& table = std::get<bag_attrs>(attrs).table;
      if (table.rank() != 2 || in[0].shape.rank() < 1 || in[1].shape.rank() < 1 || in[0].shape.at(-1) != table[1] ||
          without_last(in[0].shape) != without_last(in[1].shape))
        return shape_error(kind, in, "expects (dy [*,D], ids [*,L]) for table " + table.to_string());
      return types{{table, dtype::f32}};
    }
    case k::embedding_bag_sparse_grad: {
      if (auto c = check_operands(kind, in, 2, {1}); !c) return c.error();
      const shape& table = std::get<bag_attrs>(attrs).table;
      if (table.rank() != 2 || in[0].shape.rank() < 1 || in[1].shape.rank() < 1 || in[0].shape.at(-1) != table[1] ||
          without_last(in[0].shape) != without_last(in[1].shape))
        return shape_error(kind, in, "expects (dy [*,D], ids [*,L]) for table " + table.to_string());
      const std::int64_t n = in[1].shape.numel();
      return types{{shape{n}, dtype::i32}, {shape{n, table[1]}, dtype::f32}};
    }
    case k::pairwise_dot_grad: {
      if (auto c = check_operands(kind, in, 2); !c) return c.error();
      const shape &dy = in[0].shape, &x = in[1].shape;
      if (x.rank() < 2 || dy.rank() != x.rank() - 1 || dy.at(-1) != x.at(-2) * (x.at(-2) - 1) / 2 ||
          without_last(dy) != without_last(without_last(x)))
        return shape_error(kind, in, "expects (dy [*,F(F-1)/2], x [*,F,D])");
      return types{in[1]};
    }
    case k::bce_with_logits_grad: {
      if (auto c = check_operands(kind, in, 3); !c) return c.error();
      if (in[0].shape.rank() != 0 || in[1].shape != in[2].shape)
        return shape_error(kind, in, "expects (dloss [], logits, labels) with equal shapes");
      return types{in[1]};
    }
    case k::embedding_grad: {
      if (auto c = check_operands(kind, in, 2, {1}); !c) return c.error();
      const shape& table = std::get<shape_attrs>(attrs).to;
      if (table.rank() != 2 || in[0].shape.rank() < 1 || in[0].shape.at(-1) != table[1] ||
          without_last(in[0].shape) != in[1].shape)
        return shape_error(kind, in, "expects (dy [*,D], ids [*]) for table " + table.to_string());
      return types{{table, dtype::f32}};
    }
    case k::allreduce:
      if (auto c = check_operands(kind, in, 1); !c) return c.error();
      return types{in[0]};
    case k::all_gather:
    case k::reduce_scatter: {
      if (auto c = check_operands(kind, in, 1); !c) return c.error();
      const auto& a = std::get<collective_attrs>(attrs);
      const shape& x = in[0].shape;
      if (a.dim < 0 || a.dim >= x.rank() || a.parts < 1 || a.index < 0 || a.index >= a.parts || a.granule < 1 ||
          a.extent % a.granule != 0 || a.owner < -1 || a.owner >= a.parts)
        return shape_error(kind, in, "bad collective attributes");
      range mine = shard_part(shard{a.dim, a.granule, a.owner}, a.extent, a.parts, a.index);
      shape out = x;
      if (kind == k::all_gather) {
        if (x[a.dim] != mine.size()) return shape_error(kind, in, "local shard does not match this rank's range");
        out[a.dim] = a.extent;
      } else {
        if (x[a.dim] != a.extent) return shape_error(kind, in, "operand is not the whole extent");
        out[a.dim] = mine.size();
      }
      return types{{out, in[0].type}};
    }
    case k::count_:
      break;
  }
  return make_error(errc::invalid_argument, "unknown op");
}

}  // namespace cohort
