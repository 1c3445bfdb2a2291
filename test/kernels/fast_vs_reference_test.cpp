// Every fast CPU kernel against its plain-loop reference: forward outputs and all
// gradients of every op case, over several random shape draws, serial and with a pool.
#include <doctest/doctest.h>

#include <set>

#include "harness.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/thread_pool.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("every op has a reference and a fast kernel (communication comes from the runtime)") {
  auto ref = kernels::reference_kernels();
  auto cpu = kernels::cpu_kernels();
  for (int k = 0; k < op_count; ++k) {
    CAPTURE(to_string(static_cast<op_kind>(k)));
    if (is_communication(static_cast<op_kind>(k))) {
      CHECK((ref[static_cast<op_kind>(k)] == nullptr));
      continue;
    }
    CHECK((ref[static_cast<op_kind>(k)] != nullptr));
    CHECK((cpu[static_cast<op_kind>(k)] != nullptr));
  }
}

TEST_CASE("the op cases, forward and backward, cover every computing op kind") {
  std::set<op_kind> seen;
  for (const auto& c : all_op_cases()) {
    auto run = prepare(c, 1);
    for (const auto& n : run->g.nodes()) seen.insert(n.kind);
  }
  for (int k = 0; k < op_count; ++k) {
    CAPTURE(to_string(static_cast<op_kind>(k)));
    if (is_communication(static_cast<op_kind>(k))) continue;  // test/actors covers these
    CHECK(seen.count(static_cast<op_kind>(k)) == 1);
  }
}

TEST_CASE("fast kernels match the reference kernels on every op case") {
  auto ref = kernels::reference_kernels();
  auto cpu = kernels::cpu_kernels();
  kernels::thread_pool pool(3);  // odd size: uneven partitions
  const float rtol = 2e-5f, atol = 2e-5f;
  for (const auto& c : all_op_cases()) {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      CAPTURE(c.name);
      CAPTURE(seed);
      auto run = prepare(c, seed);
      auto expected = execute(*run, ref);
      for (kernels::thread_pool* p : {static_cast<kernels::thread_pool*>(nullptr), &pool}) {
        CAPTURE(p != nullptr);
        auto got = execute(*run, cpu, p);
        CHECK_MESSAGE(close(got.out, expected.out, rtol, atol), describe_mismatch(got.out, expected.out, rtol, atol));
        REQUIRE(got.grads.size() == expected.grads.size());
        for (std::size_t i = 0; i < got.grads.size(); ++i) {
          CAPTURE(run->g.value(run->grads.param_grads[i].first).name);
          // gradients sum over more terms (and float vs double accumulators): looser
          CHECK_MESSAGE(close(got.grads[i], expected.grads[i], 1e-4f, 1e-4f),
                        describe_mismatch(got.grads[i], expected.grads[i], 1e-4f, 1e-4f));
        }
      }
    }
  }
}

TEST_CASE("a bad label or embedding id is an error naming the op, not a crash") {
  for (auto table : {kernels::reference_kernels(), kernels::cpu_kernels()}) {
    CAPTURE(table.name());
    graph g;
    var table_p = g.parameter("t", {4, 3}, init_spec::ones());
    var ids = g.input("ids", {2}, dtype::i32);
    var logits = embedding(table_p, ids);
    var labels = g.input("labels", {2}, dtype::i32);
    var loss = softmax_cross_entropy(logits, labels);
    REQUIRE(g.check().ok());
    parameter_store ps{{"t", tensor::full({4, 3}, 1.f)}};
    auto ex = kernels::executor::create(g, ps, {loss.id}, {&table, nullptr});
    REQUIRE(ex.ok());
    std::int32_t bad_ids[] = {1, 4};
    ex->input(ids.id).copy_from(tensor::from_ints({2}, bad_ids));
    auto st = ex->run();
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("embedding: id 4") != std::string::npos);
    std::int32_t good_ids[] = {1, 3}, bad_labels[] = {0, 3};
    ex->input(ids.id).copy_from(tensor::from_ints({2}, good_ids));
    ex->input(labels.id).copy_from(tensor::from_ints({2}, bad_labels));
    st = ex->run();
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("label 3 in row 1") != std::string::npos);
  }
}
