// Per-op placement rules on one mesh axis. Each rule sees the operands' placements and
// returns the placements it needs them in (usually the same) and its results' placements.
#include "graph/completion.hpp"

#include <algorithm>
#include <optional>

namespace cohort {
namespace {

using placements = std::vector<placement>;

struct rule_out {
  placements req;
  placements out;
};

placement R() { return replicate{}; }
placement P() { return partial{}; }
placement S(int dim, std::int64_t granule = 1) { return shard{dim, granule}; }

class rules {
 public:
  explicit rules(const graph& g) : g_(g) {}
  rule_out apply(const node& n, const placements& in) const;

 private:
  const shape& shape_of(value_id v) const { return g_.value(v).type.shape; }
  int rank_of(value_id v) const { return shape_of(v).rank(); }

  rule_out matmul(const node& n, placements in) const;
  rule_out elementwise_binary(const node& n, placements in, bool linear_both) const;
  rule_out bias_add(const node& n, placements in) const;
  rule_out pointwise(const node& n, placements in, bool linear) const;
  rule_out last_axis(const node& n, placements in) const;
  rule_out layernorm(const node& n, placements in) const;
  rule_out embedding(const node& n, placements in) const;
  rule_out reshape(const node& n, placements in) const;
  rule_out permute(const node& n, placements in) const;
  rule_out slice_like(const node& n, placements in) const;
  rule_out concat(const node& n, placements in) const;
  rule_out reduce(const node& n, placements in, bool is_sum) const;
  rule_out causal_mask(const node& n, placements in) const;
  rule_out sum_to(const node& n, placements in) const;
  rule_out broadcast_to(const node& n, placements in) const;
  rule_out grad_like_mul(const node& n, placements in) const;
  rule_out softmax_grad(const node& n, placements in) const;
  rule_out layernorm_grad(const node& n, placements in) const;
  rule_out embedding_grad(const node& n, placements in) const;
  rule_out attention(const node& n, placements in) const;
  rule_out pairwise_dot(const node& n, placements in) const;
  rule_out pairwise_dot_grad(const node& n, placements in) const;
  rule_out all_replicated(const node& n) const;

  const graph& g_;
};

rule_out rules::all_replicated(const node& n) const {
  return {placements(n.inputs.size(), R()), placements(n.outputs.size(), R())};
}

// C = op(A) op(B); A [*,M,K] (or [*,K,M]), B [*,K,N] / [K,N] (or transposed).
rule_out rules::matmul(const node& n, placements in) const {
  const auto& at = std::get<matmul_attrs>(n.attrs);
  int ra = rank_of(n.inputs[0]), rb = rank_of(n.inputs[1]), ro = rank_of(n.outputs[0]);
  int a_m = at.trans_a ? ra - 1 : ra - 2, a_k = at.trans_a ? ra - 2 : ra - 1;
  int b_k = at.trans_b ? rb - 1 : rb - 2, b_n = at.trans_b ? rb - 2 : rb - 1;
  bool b_batched = rb > 2;
  placement& pa = in[0];
  placement& pb = in[1];
  // A partial against a sharded B: summing A once (an activation) is far cheaper than
  // gathering B (a weight) — and than what keeping the sum partial costs downstream, where
  // every weight gradient it reaches would come out partial and be summed whole
  if (is_partial(pa) && as_shard(pb) != nullptr) pa = R();
  if (is_partial(pa)) return {{pa, R()}, {P()}};
  if (const shard* s = as_shard(pa)) {
    if (s->dim < ra - 2) return {{pa, b_batched ? placement(S(s->dim, s->granule)) : R()}, {S(s->dim, s->granule)}};
    if (s->dim == a_m) return {{pa, R()}, {S(ro - 2, s->granule)}};
    return {{pa, S(b_k, s->granule)}, {P()}};  // contraction dimension split: partial sums
  }
  // A replicated: B decides.
  if (is_partial(pb)) return {{pa, pb}, {P()}};
  if (const shard* s = as_shard(pb)) {
    if (s->dim == b_n) return {{pa, pb}, {S(ro - 1, s->granule)}};
    if (s->dim == b_k) return {{S(a_k, s->granule), pb}, {P()}};
    return {{S(s->dim, s->granule), pb}, {S(s->dim, s->granule)}};  // a batch dimension
  }
  return {{pa, pb}, {R()}};
}

// Operand dimension `d` of value `v`, seen in the output (right-aligned broadcasting);
// nullopt when that dimension is broadcast (extent 1 against a larger output extent).
std::optional<int> to_output_dim(const shape& operand, const shape& out, int d) {
  int o = d + out.rank() - operand.rank();
  if (operand[d] != out[o]) return std::nullopt;
  return o;
}

// The operand dimension that maps to output dimension `o`, or nullopt (missing or broadcast).
std::optional<int> from_output_dim(const shape& operand, const shape& out, int o) {
  int d = o - (out.rank() - operand.rank());
  if (d < 0 || operand[d] != out[o]) return std::nullopt;
  return d;
}

rule_out rules::elementwise_binary(const node& n, placements in, bool linear_both) const {
  const shape& out = shape_of(n.outputs[0]);
  const shape* shapes[2] = {&shape_of(n.inputs[0]), &shape_of(n.inputs[1])};
  // A shard on a non-broadcast dimension decides the output; the other operand follows.
  for (int i = 0; i < 2; ++i) {
    const shard* s = as_shard(in[static_cast<std::size_t>(i)]);
    if (s == nullptr) continue;
    auto o = to_output_dim(*shapes[i], out, s->dim);
    if (!o) {
      in[static_cast<std::size_t>(i)] = R();
      continue;
    }
    int j = 1 - i;
    auto dj = from_output_dim(*shapes[j], out, *o);
    in[static_cast<std::size_t>(j)] = dj ? S(*dj, s->granule) : R();
    return {in, {S(*o, s->granule)}};
  }
  bool p0 = is_partial(in[0]), p1 = is_partial(in[1]);
  if (p0 && p1) {
    if (linear_both) return {in, {P()}};  // (a0 + a1) + (b0 + b1)
    return {{P(), R()}, {P()}};           // a product needs one factor whole
  }
  if (p0 || p1) {
    if (linear_both) return {{R(), R()}, {R()}};                     // partial + replicated: make it whole
    if (n.kind == op_kind::div && p1) return {{in[0], R()}, {R()}};  // a / (partial b): no
    return {in, {P()}};                                              // partial * replicated, partial / replicated
  }
  return {in, {R()}};
}

rule_out rules::bias_add(const node& n, placements in) const {
  int last = rank_of(n.inputs[0]) - 1;
  if (is_partial(in[0])) return {{R(), R()}, {R()}};  // the bias is added once, after the sum
  if (const shard* s = as_shard(in[0])) {
    if (s->dim == last) return {{in[0], S(0, s->granule)}, {in[0]}};
    return {{in[0], R()}, {in[0]}};
  }
  if (const shard* s = as_shard(in[1])) return {{S(last, s->granule), in[1]}, {S(last, s->granule)}};
  return {{R(), R()}, {R()}};
}

rule_out rules::pointwise(const node&, placements in, bool linear) const {
  if (is_partial(in[0]) && !linear) return {{R()}, {R()}};
  return {in, {in[0]}};
}

// softmax / log_softmax: rows are independent, the last axis must be whole.
rule_out rules::last_axis(const node& n, placements in) const {
  int last = rank_of(n.inputs[0]) - 1;
  const shard* s = as_shard(in[0]);
  if (is_partial(in[0]) || (s != nullptr && s->dim == last)) return {{R()}, {R()}};
  return {in, {in[0]}};
}

rule_out rules::layernorm(const node& n, placements in) const {
  int last = rank_of(n.inputs[0]) - 1;
  const shard* s = as_shard(in[0]);
  if (s != nullptr && s->dim != last) return {{in[0], R(), R()}, {in[0]}};
  return {{R(), R(), R()}, {R()}};
}

rule_out rules::embedding(const node& n, placements in) const {
  int out_last = rank_of(n.outputs[0]) - 1;
  const shard* t = as_shard(in[0]);
  if (t != nullptr && t->dim == 1) return {{in[0], R()}, {S(out_last, t->granule)}};
  // a row shard pools the ids it holds: partial sums (every rank sees every id)
  if (t != nullptr && t->dim == 0 && n.kind == op_kind::embedding_bag) return {{in[0], R()}, {P()}};
  // embedding_bag pools its ids' last axis: a shard there is gathered first
  const shard* ids = as_shard(in[1]);
  const bool pooled = n.kind == op_kind::embedding_bag && ids != nullptr && ids->dim == rank_of(n.inputs[1]) - 1;
  if (ids != nullptr && !pooled) return {{R(), in[1]}, {in[1]}};
  return {{R(), R()}, {R()}};
}

// Maps a shard through a reshape when its dimension splits (the shard lands on the
// outermost non-1 factor, if its granule covers the inner factors) or merges (the shard
// must be on the outermost non-1 merged dimension; the granule grows by the inner ones).
std::optional<shard> reshape_shard(const shape& in, const shape& out, const shard& s) {
  // Walk both shapes in groups whose element counts agree.
  int i = 0, o = 0;
  while (i < in.rank() || o < out.rank()) {
    int i0 = i, o0 = o;
    std::int64_t pi = i < in.rank() ? in[i++] : 1, po = o < out.rank() ? out[o++] : 1;
    while (pi != po) {
      if (pi < po && i < in.rank())
        pi *= in[i++];
      else if (po < pi && o < out.rank())
        po *= out[o++];
      else
        return std::nullopt;
    }
    if (s.dim < i0 || s.dim >= i) continue;
    // input dims [i0, i), output dims [o0, o)
    auto first_non_one = [](const shape& sh, int b, int e) {
      while (b < e - 1 && sh[b] == 1) ++b;
      return b;
    };
    int ii = first_non_one(in, i0, i), oo = first_non_one(out, o0, o);
    if (s.dim != ii) return std::nullopt;
    std::int64_t inner_in = 1, inner_out = 1;
    for (int k = ii + 1; k < i; ++k) inner_in *= in[k];
    for (int k = oo + 1; k < o; ++k) inner_out *= out[k];
    // element granule of the shard over the whole group, then in units of out dim oo
    std::int64_t elems = s.granule * inner_in;
    if (elems % inner_out != 0) return std::nullopt;
    return shard{oo, elems / inner_out};
  }
  return std::nullopt;
}

rule_out rules::reshape(const node& n, placements in) const {
  if (const shard* s = as_shard(in[0])) {
    auto mapped = reshape_shard(shape_of(n.inputs[0]), shape_of(n.outputs[0]), *s);
    if (!mapped) return {{R()}, {R()}};
    return {in, {*mapped}};
  }
  return {in, {in[0]}};
}

rule_out rules::permute(const node& n, placements in) const {
  const auto& perm = std::get<permute_attrs>(n.attrs).perm;
  if (const shard* s = as_shard(in[0])) {
    int o = static_cast<int>(std::find(perm.begin(), perm.end(), s->dim) - perm.begin());
    return {in, {S(o, s->granule)}};
  }
  return {in, {in[0]}};
}

rule_out rules::slice_like(const node& n, placements in) const {
  int axis = std::get<slice_attrs>(n.attrs).axis;
  const shard* s = as_shard(in[0]);
  if (s != nullptr && s->dim == axis) return {{R()}, {R()}};
  return {in, {in[0]}};
}

rule_out rules::concat(const node& n, placements in) const {
  int axis = std::get<concat_attrs>(n.attrs).axis;
  for (const auto& p : in)
    if (const shard* s = as_shard(p); s != nullptr && s->dim != axis) return {placements(in.size(), p), {p}};
  bool all_partial = std::all_of(in.begin(), in.end(), [](const placement& p) { return is_partial(p); });
  if (all_partial) return {in, {P()}};
  return {placements(in.size(), R()), {R()}};
}

rule_out rules::reduce(const node& n, placements in, bool is_sum) const {
  const auto& a = std::get<reduce_attrs>(n.attrs);
  if (is_partial(in[0])) return {in, {P()}};
  if (const shard* s = as_shard(in[0])) {
    bool reduced = std::binary_search(a.axes.begin(), a.axes.end(), s->dim);
    if (reduced) return is_sum ? rule_out{in, {P()}} : rule_out{{R()}, {R()}};
    int before = static_cast<int>(std::lower_bound(a.axes.begin(), a.axes.end(), s->dim) - a.axes.begin());
    return {in, {S(a.keepdim ? s->dim : s->dim - before, s->granule)}};
  }
  return {in, {R()}};
}

rule_out rules::causal_mask(const node& n, placements in) const {
  int r = rank_of(n.inputs[0]);
  const shard* s = as_shard(in[0]);
  if (s != nullptr && s->dim >= r - 2) return {{R()}, {R()}};
  bool linear = std::get<causal_mask_attrs>(n.attrs).fill == 0.f;
  if (is_partial(in[0]) && !linear) return {{R()}, {R()}};
  return {in, {in[0]}};
}

rule_out rules::sum_to(const node& n, placements in) const {
  if (const shard* s = as_shard(in[0])) {
    const shape& x = shape_of(n.inputs[0]);
    const shape& to = shape_of(n.outputs[0]);
    auto d = from_output_dim(to, x, s->dim);  // the target dimension it lands on
    if (!d) return {in, {P()}};               // summed away: each rank holds a part
    return {in, {S(*d, s->granule)}};
  }
  return {in, {in[0]}};
}

rule_out rules::broadcast_to(const node& n, placements in) const {
  if (const shard* s = as_shard(in[0])) {
    auto o = to_output_dim(shape_of(n.inputs[0]), shape_of(n.outputs[0]), s->dim);
    if (!o) return {{R()}, {R()}};
    return {in, {S(*o, s->granule)}};
  }
  return {in, {in[0]}};
}

// (dy, z) -> dx, linear in dy: relu_grad, gelu_grad, tanh_grad.
rule_out rules::grad_like_mul(const node&, placements in) const {
  if (is_partial(in[1])) in[1] = R();
  if (is_partial(in[0])) return {{P(), R()}, {P()}};
  if (as_shard(in[0])) return {{in[0], in[0]}, {in[0]}};
  if (as_shard(in[1])) return {{in[1], in[1]}, {in[1]}};
  return {{R(), R()}, {R()}};
}

rule_out rules::softmax_grad(const node& n, placements in) const {
  int last = rank_of(n.inputs[0]) - 1;
  auto on_last = [&](const placement& p) {
    const shard* s = as_shard(p);
    return s != nullptr && s->dim == last;
  };
  if (on_last(in[0]) || on_last(in[1]) || is_partial(in[1])) {
    if (is_partial(in[0])) return {{P(), R()}, {P()}};
    return {{R(), R()}, {R()}};
  }
  return grad_like_mul(n, in);
}

rule_out rules::layernorm_grad(const node& n, placements in) const {
  int last = rank_of(n.inputs[0]) - 1;
  auto on_last = [&](const placement& p) {
    const shard* s = as_shard(p);
    return s != nullptr && s->dim == last;
  };
  if (on_last(in[0]) || on_last(in[1]) || is_partial(in[1])) in[1] = R();
  if (on_last(in[0])) in[0] = R();
  if (is_partial(in[0])) return {{P(), R(), R()}, {P(), P(), P()}};
  if (as_shard(in[0])) return {{in[0], in[0], R()}, {in[0], P(), P()}};
  if (as_shard(in[1])) return {{in[1], in[1], R()}, {in[1], P(), P()}};
  return {{R(), R(), R()}, {R(), R(), R()}};
}

rule_out rules::embedding_grad(const node& n, placements in) const {
  int last = rank_of(n.inputs[0]) - 1;
  if (is_partial(in[0])) return {{P(), R()}, {P()}};
  if (const shard* s = as_shard(in[0])) {
    if (s->dim == last) return {{in[0], R()}, {S(1, s->granule)}};
    return {{in[0], S(s->dim, s->granule)}, {P()}};  // each rank scatters its own rows
  }
  return {{R(), R()}, {R()}};
}

// attention and attention_grad: every operand sharded on one batch dimension (heads, under
// tensor parallelism) computes its own slice; anything else, replicated.
rule_out rules::attention(const node& n, placements in) const {
  const int batch_dims = rank_of(n.outputs[0]) - 2;
  const shard* s = nullptr;
  for (const auto& p : in)
    if (const shard* x = as_shard(p); x != nullptr && x->dim < batch_dims) s = s ? s : x;
  if (s == nullptr) return all_replicated(n);
  const placement each = S(s->dim, s->granule);
  return {placements(n.inputs.size(), each), placements(n.outputs.size(), each)};
}

// pairwise_dot: a batch shard stays one; a shard of D leaves each rank a part of every dot.
rule_out rules::pairwise_dot(const node& n, placements in) const {
  const int r = rank_of(n.inputs[0]);
  if (const shard* s = as_shard(in[0])) {
    if (s->dim < r - 2) return {in, {in[0]}};
    if (s->dim == r - 1) return {in, {P()}};
  }
  return all_replicated(n);
}

// pairwise_dot_grad (dy, x): batch shards on both, or x sharded on D with dy whole.
rule_out rules::pairwise_dot_grad(const node& n, placements in) const {
  const int r = rank_of(n.inputs[1]);
  const shard* d = as_shard(in[0]);
  const shard* x = as_shard(in[1]);
  if (d != nullptr && d->dim < r - 2) return {{in[0], in[0]}, {in[0]}};
  if (x != nullptr && x->dim < r - 2) return {{in[1], in[1]}, {in[1]}};
  if (x != nullptr && x->dim == r - 1 && !is_partial(in[0])) return {{R(), in[1]}, {in[1]}};
  return all_replicated(n);
}

rule_out rules::apply(const node& n, const placements& in) const {
  using k = op_kind;
  switch (n.kind) {
    case k::matmul:
      return matmul(n, in);
    case k::add:
    case k::sub:
      return elementwise_binary(n, in, true);
    case k::mul:
    case k::div:
      return elementwise_binary(n, in, false);
    case k::bias_add:
      return bias_add(n, in);
    case k::scale:
      return pointwise(n, in, true);
    case k::relu:
    case k::gelu:
    case k::tanh:
      return pointwise(n, in, false);
    case k::softmax:
    case k::log_softmax:
      return last_axis(n, in);
    case k::softmax_cross_entropy:
    case k::mse:
      return all_replicated(n);
    case k::layernorm:
      return layernorm(n, in);
    case k::embedding:
    case k::embedding_bag:
      return embedding(n, in);
    case k::pairwise_dot:
      return pairwise_dot(n, in);
    case k::pairwise_dot_grad:
      return pairwise_dot_grad(n, in);
    case k::reshape:
      return reshape(n, in);
    case k::permute:
      return permute(n, in);
    case k::slice:
    case k::slice_grad:
      return slice_like(n, in);
    case k::concat:
      return concat(n, in);
    case k::sum:
      return reduce(n, in, true);
    case k::mean:
      return reduce(n, in, false);
    case k::causal_mask:
      return causal_mask(n, in);
    case k::sum_to:
      return sum_to(n, in);
    case k::broadcast_to:
      return broadcast_to(n, in);
    case k::relu_grad:
    case k::gelu_grad:
    case k::tanh_grad:
      return grad_like_mul(n, in);
    case k::softmax_grad:
    case k::log_softmax_grad:
      return softmax_grad(n, in);
    case k::softmax_cross_entropy_grad:
    case k::mse_grad:
      return all_replicated(n);
    case k::layernorm_grad:
      return layernorm_grad(n, in);
    case k::embedding_grad:
    case k::embedding_bag_grad:
      return embedding_grad(n, in);
    case k::attention:
    case k::attention_grad:
      return attention(n, in);
    default:
      return all_replicated(n);
  }
}

status check_annotation(const graph& g, value_id id, const placement& p, std::int64_t degree) {
  const auto& v = g.value(id);
  if (is_partial(p))
    return make_error(errc::invalid_argument, "'" + v.name + "': a parameter or input cannot be annotated partial");
  const shard* s = as_shard(p);
  if (s == nullptr) return {};
  const shape& sh = v.type.shape;
  if (s->dim < 0 || s->dim >= sh.rank())
    return make_error(errc::invalid_argument, "'" + v.name + "': shard dimension " + std::to_string(s->dim) +
                                                  " out of range for " + sh.to_string());
  if (s->owner == shard::one_part || s->owner >= 0) {
    if (s->owner >= degree)
      return make_error(errc::invalid_argument, "'" + v.name + "': owner " + std::to_string(s->owner) +
                                                    " out of range for " + std::to_string(degree) + " ranks");
    return {};  // whole on one rank: any extent
  }
  if (s->owner != shard::split)
    return make_error(errc::invalid_argument, "'" + v.name + "': shard owner " + std::to_string(s->owner));
  if (s->granule < 1 || sh[s->dim] % s->granule != 0)
    return make_error(errc::invalid_argument, "'" + v.name + "': granule " + std::to_string(s->granule) +
                                                  " does not divide extent " + std::to_string(sh[s->dim]));
  if (sh[s->dim] / s->granule < degree)
    return make_error(errc::invalid_argument, "'" + v.name + "' " + sh.to_string() + ": dimension " +
                                                  std::to_string(s->dim) + " has " +
                                                  std::to_string(sh[s->dim] / s->granule) + " units, fewer than the " +
                                                  std::to_string(degree) + " ranks to shard it over");
  return {};
}

// The values annotated whole on one part (shard::one_part) get their part: largest first
// onto the part holding the fewest bytes so far (ties: the lower part), as TorchRec's
// table-wise sharding balances tables. Deterministic: every rank computes the same owners.
void assign_owners(const graph& g, axis_completion& c) {
  std::vector<value_id> whole;
  for (std::size_t v = 0; v < c.values.size(); ++v)
    if (const shard* s = as_shard(c.values[v]); s != nullptr && s->owner == shard::one_part)
      whole.push_back(static_cast<value_id>(v));
  auto bytes = [&](value_id v) { return g.value(v).type.shape.numel(); };
  std::stable_sort(whole.begin(), whole.end(), [&](value_id a, value_id b) { return bytes(a) > bytes(b); });
  std::vector<std::int64_t> held(static_cast<std::size_t>(c.degree), 0);
  for (value_id v : whole) {
    auto least = std::min_element(held.begin(), held.end());
    *least += bytes(v);
    std::get<shard>(c.values[static_cast<std::size_t>(v)]).owner = static_cast<int>(least - held.begin());
  }
}

}  // namespace

result<axis_completion> complete_axis(const graph& g, const std::string& axis, std::int64_t degree) {
  if (auto st = g.check(); !st) return st.error();
  axis_completion c;
  c.axis = axis;
  c.degree = degree;
  c.values.assign(g.num_values(), R());
  if (degree > 1)
    for (std::size_t v = 0; v < g.num_values(); ++v) {
      const auto& info = g.value(static_cast<value_id>(v));
      if (info.kind == value_kind::activation) continue;
      placement p = g.annotation(static_cast<value_id>(v), axis);
      if (auto st = check_annotation(g, static_cast<value_id>(v), p, degree); !st) return st.error();
      c.values[v] = p;
    }
  assign_owners(g, c);
  rules r(g);
  for (const auto& n : g.nodes()) {
    placements in;
    for (auto v : n.inputs) in.push_back(c.values[static_cast<std::size_t>(v)]);
    rule_out out = degree > 1 ? r.apply(n, in) : rule_out{in, placements(n.outputs.size(), R())};
    for (std::size_t i = 0; i < in.size(); ++i) c.reshards += in[i] == out.req[i] ? 0 : 1;
    c.required.push_back(std::move(out.req));
    for (std::size_t i = 0; i < n.outputs.size(); ++i) c.values[static_cast<std::size_t>(n.outputs[i])] = out.out[i];
  }
  return c;
}

std::vector<std::pair<value_id, placement>> gradient_fixups(const graph&, const gradients& gr,
                                                            const axis_completion& c) {
  std::vector<std::pair<value_id, placement>> out;
  for (auto [p, d] : gr.param_grads)
    if (!(c.placement_of(d) == c.placement_of(p))) out.emplace_back(d, c.placement_of(p));
  return out;
}

}  // namespace cohort
