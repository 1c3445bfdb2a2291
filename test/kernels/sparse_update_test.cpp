// Sparse table gradients: the entries embedding_bag_sparse_grad emits, summed by row
// (row_sums), are the dense embedding_bag_grad bit for bit, and the sparse SGD and Adagrad
// updates of the touched rows are the dense updates; optimizers that move untouched rows are
// refused. The fused path (row_sums::add_bags, the serial trainer's fused_tables) sums the same
// rows from the bags' output gradient without the entries, bit for bit.
#include <doctest/doctest.h>

#include <map>

#include "graph/dsl.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/optimizer.hpp"
#include "kernels/trainer.hpp"
#include "support/tensor_checks.hpp"

using namespace cohort;
using namespace cohort::kernels;

TEST_CASE("sparse table gradient entries summed by row are the dense gradient, and update it alike") {
  for (bool mean : {false, true}) {
    CAPTURE(mean);
    const std::int64_t vocab = 13, dim = 5, rows = 40, length = 3;
    graph g;
    var dy = g.input("dy", {rows, dim});
    var ids = g.input("ids", {rows, length}, dtype::i32);
    const bag_attrs attrs{mean, {vocab, dim}};
    g.apply1(op_kind::embedding_bag_grad, attrs, {dy, ids});        // node 0
    g.apply(op_kind::embedding_bag_sparse_grad, attrs, {dy, ids});  // node 1
    REQUIRE(g.check().ok());
    tensor dy_t = test::random_tensor({rows, dim}, 3), ids_t = test::random_ints({rows, length}, 4, vocab);
    for (std::int64_t i = 0; i < ids_t.numel(); i += 4) ids_t.data<std::int32_t>()[i] = bag_padding;
    std::vector<tensor> in{dy_t, ids_t};
    std::vector<tensor> dense_out{tensor::empty({vocab, dim})};
    std::vector<tensor> sparse_out{tensor::empty({rows * length}, dtype::i32), tensor::empty({rows * length, dim})};
    auto cpu = cpu_kernels();
    REQUIRE(cpu[op_kind::embedding_bag_grad]({g.nodes()[0], in, dense_out}).ok());
    REQUIRE(cpu[op_kind::embedding_bag_sparse_grad]({g.nodes()[1], in, sparse_out}).ok());
    CHECK(sparse_out[0].data<std::int32_t>()[0] == bag_padding);

    row_sums sums(rows * length, dim);
    for (int again = 0; again < 2; ++again) {  // a second step reuses the scratch
      sums.gather(sparse_out[0].data<std::int32_t>(), sparse_out[1].data<float>(), rows * length);
      tensor scattered = tensor::zeros({vocab, dim});
      for (std::int64_t k = 0; k < sums.size(); ++k)
        for (std::int64_t j = 0; j < dim; ++j)
          scattered.data<float>()[sums.rows()[k] * dim + j] = sums.sums()[k * dim + j];
      for (std::int64_t i = 0; i < vocab * dim; ++i) CHECK(scattered.data<float>()[i] == dense_out[0].data<float>()[i]);
    }
    row_sums fused(rows * length, dim);  // the bags' output gradient summed by id, no entries
    fused.clear();
    fused.add_bags(ids_t.data<std::int32_t>(), rows, length, dy_t.data<float>(), mean);
    REQUIRE(fused.size() == sums.size());
    for (std::int64_t k = 0; k < sums.size(); ++k) {
      CHECK(fused.rows()[k] == sums.rows()[k]);
      for (std::int64_t j = 0; j < dim; ++j) CHECK(fused.sums()[k * dim + j] == sums.sums()[k * dim + j]);
    }

    for (const optimizer_config& rule :
         {optimizer_config{sgd_config{.lr = 0.3f}}, optimizer_config{adagrad_config{.lr = 0.3f}}}) {
      CAPTURE(rule.index());
      tensor a = test::random_tensor({vocab, dim}, 5), b = a.clone();
      optimizer_state sa = make_state(a, rule), sb = make_state(b, rule);
      for (int step = 0; step < 3; ++step) {  // Adagrad's sums carry over
        apply_update(a, dense_out[0], sa, rule);
        apply_sparse_update(b, sums, sb, rule);
      }
      for (std::int64_t i = 0; i < vocab * dim; ++i) CHECK(a.data<float>()[i] == b.data<float>()[i]);
      for (std::size_t s = 0; s < sa.slots.size(); ++s)
        for (std::int64_t i = 0; i < vocab * dim; ++i)
          CHECK(sa.slots[s].data<float>()[i] == sb.slots[s].data<float>()[i]);
      CHECK(sb.step == 3);
    }
  }
  CHECK(sparse_update_problem(sgd_config{.lr = 0.1f}).empty());
  CHECK(sparse_update_problem(sgd_config{.lr = 0.1f, .weight_decay = 0.1f}).find("weight decay") != std::string::npos);
  CHECK(sparse_update_problem(adamw_config{}).find("AdamW") != std::string::npos);
  CHECK(sparse_update_problem(adagrad_config{}).empty());
}

namespace {

// Two pooled tables (one summed, one averaged, bags of 3 with padding and repeated ids) under
// a small dense head, trained by the serial trainer with sparse tables.
std::vector<float> train_tables(bool fused, const optimizer_config& rule, std::map<std::string, tensor>& params) {
  const std::int64_t batch = 16, length = 3, dim = 4;
  graph g;
  var x = g.input("x", {batch, dim}), y = g.input("y", {batch, 1});
  var a = embedding_bag(g.parameter("emb.a", {11, dim}, init_spec::uniform(0.5f)),
                        g.input("a", {batch, length}, dtype::i32));
  var b = embedding_bag(g.parameter("emb.b", {7, dim}, init_spec::uniform(0.5f)),
                        g.input("b", {batch, length}, dtype::i32), /*mean=*/true);
  var w = g.parameter("w", {dim, 1}, init_spec::uniform(0.5f));
  var loss = mse(matmul(a * b + x, w), y);
  auto tr =
      serial_trainer::create(g, loss, {.optimizer = rule, .seed = 3, .sparse_tables = true, .fused_tables = fused});
  REQUIRE(tr.ok());
  std::vector<float> losses;
  for (std::uint64_t step = 0; step < 4; ++step) {
    (*tr)->input("x").copy_from(test::random_tensor({batch, dim}, 10 + step));
    (*tr)->input("y").copy_from(test::random_tensor({batch, 1}, 20 + step));
    for (auto [name, vocab] : {std::pair<const char*, std::int32_t>{"a", 11}, {"b", 7}}) {
      tensor ids = test::random_ints({batch, length}, 30 + step + static_cast<std::uint64_t>(vocab), vocab);
      for (std::int64_t i = 1; i < ids.numel(); i += 5) ids.data<std::int32_t>()[i] = bag_padding;
      (*tr)->input(name).copy_from(ids);
    }
    auto l = (*tr)->step();
    REQUIRE(l.ok());
    losses.push_back(*l);
  }
  for (auto& [name, t] : (*tr)->parameters()) params[name] = t.clone();
  return losses;
}

}  // namespace

TEST_CASE("the serial trainer's fused table path trains bit for bit as the gradient entries do") {
  for (const optimizer_config& rule :
       {optimizer_config{sgd_config{.lr = 0.2f}}, optimizer_config{adagrad_config{.lr = 0.2f}}}) {
    CAPTURE(rule.index());
    std::map<std::string, tensor> fused_params, entry_params;
    const auto fused = train_tables(true, rule, fused_params);
    const auto entries = train_tables(false, rule, entry_params);
    CHECK(fused == entries);
    REQUIRE(fused_params.size() == 3);
    for (auto& [name, t] : fused_params) {
      CAPTURE(name);
      const tensor& other = entry_params.at(name);
      for (std::int64_t i = 0; i < t.numel(); ++i) CHECK(t.data<float>()[i] == other.data<float>()[i]);
    }
  }
}
