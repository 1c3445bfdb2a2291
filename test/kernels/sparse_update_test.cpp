// Sparse table gradients: the entries embedding_bag_sparse_grad emits, summed by row
// (row_sums), are the dense embedding_bag_grad bit for bit, and the sparse SGD and Adagrad
// updates of the touched rows are the dense updates; optimizers that move untouched rows are
// refused.
#include <doctest/doctest.h>

#include "graph/dsl.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/optimizer.hpp"
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
