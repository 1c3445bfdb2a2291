// The op cases.
#include "op_cases.hpp"

#include <cmath>

#include "graph/dsl.hpp"
#include "support/tensor_checks.hpp"

namespace cohort::test {
namespace {

std::int64_t pick(rng& r, std::initializer_list<std::int64_t> choices) {
  auto i = r.below(choices.size());
  return *(choices.begin() + static_cast<std::ptrdiff_t>(i));
}

std::int64_t dim(rng& r) { return pick(r, {1, 2, 3, 5, 7, 8, 13, 16}); }

// A parameter operand with random values (|v| >= min_abs keeps kinks and poles away).
var operand(graph& g, built_case& bc, rng& r, const std::string& name, shape s, float min_abs = 0.f,
            float scale = 1.f) {
  var v = g.parameter(name, s, init_spec::zeros());
  bc.params[name] = random_tensor(s, r.next(), scale, min_abs);
  return v;
}

var int_operand(graph& g, built_case& bc, rng& r, const std::string& name, shape s, std::int32_t bound) {
  var v = g.input(name, s, dtype::i32);
  bc.inputs[name] = random_ints(s, r.next(), bound);
  return v;
}

// Bags of ids [rows, length] in [0, vocab), about a third of them padding (short bags,
// and some empty ones).
var bag_operand(graph& g, built_case& bc, rng& r, shape s, std::int32_t vocab) {
  var v = g.input("ids", s, dtype::i32);
  tensor ids = random_ints(s, r.next(), vocab);
  for (std::int64_t i = 0; i < ids.numel(); ++i)
    if (r.below(3) == 0) ids.data<std::int32_t>()[i] = bag_padding;
  bc.inputs["ids"] = ids;
  return v;
}

using builder = std::function<built_case(graph&, rng&)>;

builder unary(var (*f)(var), float min_abs = 0.f) {
  return [f, min_abs](graph& g, rng& r) {
    built_case bc;
    bc.out = f(operand(g, bc, r, "x", {dim(r), dim(r), dim(r)}, min_abs));
    return bc;
  };
}

// Binary op with a broadcasting pattern for b: 0 same shape, 1 scalar, 2 row, 3 general.
builder binary(var (*f)(var, var), int pattern, float b_min_abs = 0.f) {
  return [=](graph& g, rng& r) {
    built_case bc;
    std::int64_t d0 = dim(r), d1 = dim(r), d2 = dim(r);
    shape sa{d0, d1, d2}, sb;
    switch (pattern) {
      case 0:
        sb = sa;
        break;
      case 1:
        sb = shape{1};
        break;
      case 2:
        sb = shape{d1, d2};
        break;
      default:
        sa = shape{d0, 1, d2};
        sb = shape{d1, 1};
        break;
    }
    var a = operand(g, bc, r, "a", sa);
    var b = operand(g, bc, r, "b", sb, b_min_abs);
    bc.out = f(a, b);
    return bc;
  };
}

builder matmul_case(bool ta, bool tb, int batch_kind) {
  // batch_kind: 0 plain 2-D, 1 both batched [P,...], 2 a batched and b shared, 3 rank-4 batch
  return [=](graph& g, rng& r) {
    built_case bc;
    std::int64_t m = dim(r), k = dim(r), n = dim(r), p = pick(r, {1, 2, 3}), q = pick(r, {1, 2});
    auto mat = [](std::vector<std::int64_t> batch, std::int64_t rows, std::int64_t cols, bool t) {
      batch.push_back(t ? cols : rows);
      batch.push_back(t ? rows : cols);
      return shape(std::move(batch));
    };
    std::vector<std::int64_t> ba, bb;
    if (batch_kind == 1) ba = bb = {p};
    if (batch_kind == 2) ba = {p, q};
    if (batch_kind == 3) ba = bb = {p, q};
    var a = operand(g, bc, r, "a", mat(ba, m, k, ta));
    var b = operand(g, bc, r, "b", mat(bb, k, n, tb));
    bc.out = matmul(a, b, ta, tb);
    return bc;
  };
}

std::vector<op_case> make_cases() {
  std::vector<op_case> cases;
  auto add_case = [&](std::string name, builder b, bool differentiable = true) {
    cases.push_back({std::move(name), std::move(b), differentiable});
  };
  for (int batch = 0; batch < 4; ++batch)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        add_case("matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " batch=" + std::to_string(batch),
                 matmul_case(ta != 0, tb != 0, batch));
  const char* patterns[] = {"same", "scalar", "row", "general"};
  for (int p = 0; p < 4; ++p) {
    add_case(std::string("add ") + patterns[p], binary(add, p));
    add_case(std::string("sub ") + patterns[p], binary(sub, p));
    add_case(std::string("mul ") + patterns[p], binary(mul, p));
    add_case(std::string("div ") + patterns[p], binary(div, p, 0.5f));
  }
  add_case("bias_add", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t n = dim(r);
    bc.out = bias_add(operand(g, bc, r, "x", {dim(r), dim(r), n}), operand(g, bc, r, "b", {n}));
    return bc;
  });
  add_case("scale", [](graph& g, rng& r) {
    built_case bc;
    bc.out = scale(operand(g, bc, r, "x", {dim(r), dim(r)}), -0.37f);
    return bc;
  });
  add_case("relu", unary(relu, 0.05f));
  add_case("gelu", unary(gelu));
  add_case("gelu wide range", [](graph& g, rng& r) {
    built_case bc;
    bc.out = gelu(operand(g, bc, r, "x", {dim(r), 64}, 0.f, 4.f));
    return bc;
  });
  add_case("tanh", unary(tanh));
  add_case("softmax", unary(softmax));
  add_case("log_softmax", unary(log_softmax));
  add_case("softmax_cross_entropy", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t rows = dim(r), classes = pick(r, {1, 2, 5, 10, 17});
    var logits = operand(g, bc, r, "logits", {dim(r), rows, classes}, 0.f, 2.f);
    var labels = int_operand(g, bc, r, "labels", {logits.shape()[0], rows}, static_cast<std::int32_t>(classes));
    bc.out = softmax_cross_entropy(logits, labels);
    return bc;
  });
  add_case("mse", [](graph& g, rng& r) {
    built_case bc;
    shape s{dim(r), dim(r)};
    bc.out = mse(operand(g, bc, r, "pred", s), operand(g, bc, r, "target", s));
    return bc;
  });
  add_case("layernorm", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t c = pick(r, {2, 3, 8, 17, 64});
    var x = operand(g, bc, r, "x", {dim(r), dim(r), c});
    bc.out = layernorm(x, operand(g, bc, r, "gamma", {c}), operand(g, bc, r, "beta", {c}));
    return bc;
  });
  add_case("embedding", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t vocab = pick(r, {1, 3, 10, 31}), d = dim(r);
    var table = operand(g, bc, r, "table", {vocab, d});
    var ids = int_operand(g, bc, r, "ids", {dim(r), dim(r)}, static_cast<std::int32_t>(vocab));
    bc.out = embedding(table, ids);
    return bc;
  });
  for (bool mean : {false, true})
    add_case(mean ? "embedding_bag mean" : "embedding_bag sum", [mean](graph& g, rng& r) {
      built_case bc;
      std::int64_t vocab = pick(r, {1, 3, 10, 31}), d = dim(r);
      var table = operand(g, bc, r, "table", {vocab, d});
      var ids = bag_operand(g, bc, r, {dim(r), dim(r), pick(r, {1, 2, 5})}, static_cast<std::int32_t>(vocab));
      bc.out = embedding_bag(table, ids, mean);
      return bc;
    });
  for (bool mean : {false, true})  // a tp rank's row shard (partition sets the attributes)
    add_case(
        mean ? "embedding_bag row shard mean" : "embedding_bag row shard sum",
        [mean](graph& g, rng& r) {
          built_case bc;
          std::int64_t all = pick(r, {3, 10, 31}), d = dim(r);
          std::int64_t first = static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(all)));
          std::int64_t local = 1 + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(all - first)));
          var table = g.input("table", {local, d});  // forward only: a shard's gradient is partition's
          bc.inputs["table"] = random_tensor({local, d}, r.next());
          var ids = bag_operand(g, bc, r, {dim(r), pick(r, {1, 2, 5})}, static_cast<std::int32_t>(all));
          bag_attrs a{mean, {}, first, all};
          bc.out = g.apply1(op_kind::embedding_bag, a, {table, ids});
          return bc;
        },
        false);
  for (bool mean : {false, true})  // autodiff emits it with sparse_tables; here applied directly
    add_case(
        mean ? "embedding_bag_sparse_grad mean" : "embedding_bag_sparse_grad sum",
        [mean](graph& g, rng& r) {
          built_case bc;
          std::int64_t vocab = pick(r, {1, 3, 10, 31}), d = dim(r), rows = dim(r), length = pick(r, {1, 2, 5});
          var ids = bag_operand(g, bc, r, {rows, length}, static_cast<std::int32_t>(vocab));
          var dy = g.input("dy", {rows, d});
          bc.inputs["dy"] = random_tensor({rows, d}, r.next());
          bc.out = g.apply(op_kind::embedding_bag_sparse_grad, bag_attrs{mean, {vocab, d}}, {dy, ids})[1];
          return bc;
        },
        false);
  add_case("pairwise_dot", [](graph& g, rng& r) {
    built_case bc;
    bc.out = pairwise_dot(operand(g, bc, r, "x", {dim(r), pick(r, {2, 3, 5, 27}), dim(r)}));
    return bc;
  });
  add_case("bce_with_logits", [](graph& g, rng& r) {
    built_case bc;
    shape s{dim(r), dim(r)};
    var logits = operand(g, bc, r, "logits", s, 0.f, 3.f);
    var labels = g.input("labels", s);
    tensor y = random_tensor(s, r.next());
    for (std::int64_t i = 0; i < y.numel(); ++i)  // hard labels, and some soft ones
      y.data<float>()[i] = i % 4 == 3 ? 0.5f + 0.4f * y.data<float>()[i] : (y.data<float>()[i] > 0 ? 1.f : 0.f);
    bc.inputs["labels"] = y;
    bc.out = bce_with_logits(logits, labels);
    return bc;
  });
  add_case("reshape", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t a = dim(r), b = dim(r), c = dim(r);
    bc.out = scale(reshape(operand(g, bc, r, "x", {a, b, c}), {c, -1}), 2.f);
    return bc;
  });
  add_case("transpose", [](graph& g, rng& r) {
    built_case bc;
    bc.out = transpose(operand(g, bc, r, "x", {dim(r), dim(r), dim(r)}), 0, 2);
    return bc;
  });
  add_case("permute 4-d", [](graph& g, rng& r) {
    built_case bc;
    bc.out = permute(operand(g, bc, r, "x", {dim(r), dim(r), dim(r), dim(r)}), {0, 2, 1, 3});
    return bc;
  });
  add_case("permute 5-d", [](graph& g, rng& r) {
    built_case bc;
    bc.out = permute(operand(g, bc, r, "x", {2, dim(r), 3, dim(r), dim(r)}), {2, 0, 3, 1, 4});
    return bc;
  });
  add_case("slice", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t n = pick(r, {2, 5, 9});
    var x = operand(g, bc, r, "x", {dim(r), n, dim(r)});
    bc.out = slice(x, 1, 1, n);
    return bc;
  });
  add_case("concat", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t a = dim(r), c = dim(r);
    bc.out = concat({operand(g, bc, r, "x", {a, dim(r), c}), operand(g, bc, r, "y", {a, dim(r), c}),
                     operand(g, bc, r, "z", {a, 1, c})},
                    1);
    return bc;
  });
  add_case("sum all", [](graph& g, rng& r) {
    built_case bc;
    bc.out = sum(operand(g, bc, r, "x", {dim(r), dim(r)}));
    return bc;
  });
  add_case("sum leading", [](graph& g, rng& r) {
    built_case bc;
    bc.out = sum(operand(g, bc, r, "x", {dim(r), dim(r), dim(r)}), {0, 1});
    return bc;
  });
  add_case("sum middle keepdim", [](graph& g, rng& r) {
    built_case bc;
    bc.out = sum(operand(g, bc, r, "x", {dim(r), dim(r), dim(r)}), {-2}, true);
    return bc;
  });
  add_case("mean last", [](graph& g, rng& r) {
    built_case bc;
    bc.out = mean(operand(g, bc, r, "x", {dim(r), dim(r), dim(r)}), {2});
    return bc;
  });
  add_case("mean all", [](graph& g, rng& r) {
    built_case bc;
    bc.out = mean(operand(g, bc, r, "x", {dim(r), dim(r)}));
    return bc;
  });
  add_case("causal_mask then softmax", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t t = dim(r);
    bc.out = softmax(causal_mask(operand(g, bc, r, "x", {dim(r), t, t}), -INFINITY));
    return bc;
  });
  add_case("causal_mask fill 0", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t t = dim(r);
    bc.out = causal_mask(operand(g, bc, r, "x", {dim(r), dim(r), t, t}), 0.f);
    return bc;
  });
  add_case("attention", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t b = dim(r), t = dim(r), s = dim(r), d = pick(r, {1, 4, 8});
    bc.out = attention(operand(g, bc, r, "q", {b, t, d}), operand(g, bc, r, "k", {b, s, d}),
                       operand(g, bc, r, "v", {b, s, d}), 0.5f, false);
    return bc;
  });
  add_case("attention causal over heads", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t t = dim(r), d = pick(r, {2, 8});
    shape s{dim(r), pick(r, {1, 2, 3}), t, d};
    bc.out = attention(operand(g, bc, r, "q", s), operand(g, bc, r, "k", s), operand(g, bc, r, "v", s),
                       1.f / std::sqrt(static_cast<float>(d)), true);
    return bc;
  });
  add_case("sum_to", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t a = dim(r), b = dim(r), c = dim(r);
    bc.out = sum_to(operand(g, bc, r, "x", {a, b, c}), {b, 1});
    return bc;
  });
  add_case("sum_to trailing", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t b = dim(r), c = dim(r);
    bc.out = sum_to(operand(g, bc, r, "x", {dim(r), b, c}), {b, c});
    return bc;
  });
  add_case("broadcast_to", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t a = dim(r), b = dim(r), c = dim(r);
    bc.out = broadcast_to(operand(g, bc, r, "x", {b, 1}), {a, b, c});
    return bc;
  });
  add_case("broadcast_to trailing", [](graph& g, rng& r) {
    built_case bc;
    std::int64_t b = dim(r), c = dim(r);
    bc.out = broadcast_to(operand(g, bc, r, "x", {b, c}), {dim(r), b, c});
    return bc;
  });
  return cases;
}

}  // namespace

const std::vector<op_case>& all_op_cases() {
  static const std::vector<op_case> cases = make_cases();
  return cases;
}

}  // namespace cohort::test
