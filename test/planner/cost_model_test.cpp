// The cost model's formulas against values worked out by hand, and the model analysis
// (affine costs in the batch rows, bytes across every cut) against direct builds.
#include <doctest/doctest.h>

#include "planner/analysis.hpp"
#include "planner/cost_model.hpp"
#include "planner/refit.hpp"
#include "toy_models.hpp"
#include "transport/collectives.hpp"

using namespace cohort;
using namespace cohort::planner;

TEST_CASE("compute time: the roofline (a GEMM's traffic added where the BLAS packs operands) plus the per-op cost") {
  device_speed d{1e11, 1e10};
  efficiency e{.gemm = 0.5, .memory = 0.5, .link = 0.5, .per_op_seconds = 1e-6};
  // a GEMM of 1 GFLOP over 1 MB: FLOP-bound, 1e9 / (1e11 * 0.5) = 20 ms
  CHECK(compute_seconds({1e9, 1e6, true}, d, e) == doctest::Approx(0.02 + 1e-6).epsilon(1e-12));
  // the same GEMM over 1 GB: memory-bound, 1e9 / (1e10 * 0.5) = 200 ms
  CHECK(compute_seconds({1e9, 1e9, true}, d, e) == doctest::Approx(0.2 + 1e-6).epsilon(1e-12));
  // on a CPU whose BLAS packs operands first, the two add: 20 ms + 0.2 ms, 20 ms + 200 ms
  device_speed cpu{1e11, 1e10};
  cpu.gemm_packs_operands = true;
  CHECK(compute_seconds({1e9, 1e6, true}, cpu, e) == doctest::Approx(0.02 + 2e-4 + 1e-6).epsilon(1e-12));
  CHECK(compute_seconds({1e9, 1e9, true}, cpu, e) == doctest::Approx(0.22 + 1e-6).epsilon(1e-12));
  // an element-wise op: its FLOPs never bound it, 1e8 bytes / 5e9 = 20 ms
  CHECK(compute_seconds({1e12, 1e8, false}, d, e) == doctest::Approx(0.02 + 1e-6).epsilon(1e-12));
  // with a 1 MB cache at 1e11 B/s: 1e6 bytes fit (1e6 / 5e10 = 20 us), 1e8 do not
  device_speed cached{1e11, 1e10, 1e6, 1e11};
  CHECK(compute_seconds({0, 1e6, false}, cached, e) == doctest::Approx(2e-5 + 1e-6).epsilon(1e-12));
  CHECK(compute_seconds({0, 1e8, false}, cached, e) == doctest::Approx(0.02 + 1e-6).epsilon(1e-12));
}

TEST_CASE("collectives follow the alpha-beta model of the ring") {
  link_cost l{1e9, 1e-5};
  efficiency e{.link = 0.5};
  // 8 MB over 4 ranks: 2(n-1) = 6 steps of 2 MB at 0.5 GB/s = 4 ms, plus 10 us each
  CHECK(allreduce_ring_seconds(8e6, 4, l, e) == doctest::Approx(6 * (1e-5 + 4e-3)).epsilon(1e-12));
  CHECK(reduce_scatter_ring_seconds(8e6, 4, l, e) == doctest::Approx(3 * (1e-5 + 4e-3)).epsilon(1e-12));
  CHECK(all_gather_ring_seconds(8e6, 4, l, e) == doctest::Approx(3 * (1e-5 + 4e-3)).epsilon(1e-12));
  CHECK(allreduce_ring_seconds(8e6, 1, l, e) == 0.0);
  // no bytes, no message: not even the latency (a tp node whose inputs need no collective)
  CHECK(allreduce_ring_seconds(0, 4, l, e) == 0.0);
  CHECK(reduce_scatter_ring_seconds(0, 4, l, e) == 0.0);
  CHECK(all_gather_ring_seconds(0, 4, l, e) == 0.0);
  CHECK(p2p_seconds(0, l, e) == 0.0);
  CHECK(p2p_seconds(8e6, l, e) == doctest::Approx(1e-5 + 16e-3).epsilon(1e-12));
  // a reduce-scatter and an all-gather move what one allreduce moves
  CHECK(reduce_scatter_ring_seconds(8e6, 4, l, e) + all_gather_ring_seconds(8e6, 4, l, e) ==
        doctest::Approx(allreduce_ring_seconds(8e6, 4, l, e)));
}

TEST_CASE("allreduce is priced as the runtime runs it: recursive doubling for small buffers on power-of-two groups") {
  link_cost l{1e9, 1e-5};
  efficiency e{.link = 0.5};
  // 2 ranks, 1 MB: one exchange of the whole buffer at 0.5 GB/s = 2 ms, plus one latency;
  // 8 MB: the ring, two steps of 4 MB
  CHECK(allreduce_recursive_doubling_seconds(1e6, 2, l, e) == doctest::Approx(1e-5 + 2e-3).epsilon(1e-12));
  CHECK(allreduce_seconds(1e6, 2, l, e) == doctest::Approx(1e-5 + 2e-3).epsilon(1e-12));
  CHECK(allreduce_seconds(8e6, 2, l, e) == doctest::Approx(2 * (1e-5 + 8e-3)).epsilon(1e-12));
  // 8 ranks, 32 KiB: 3 exchanges of 32 KiB; 8 ranks, 8 MB: the ring
  CHECK(allreduce_seconds(32768, 8, l, e) == doctest::Approx(3 * (1e-5 + 32768 / 5e8)).epsilon(1e-12));
  CHECK(allreduce_seconds(8e6, 8, l, e) == doctest::Approx(allreduce_ring_seconds(8e6, 8, l, e)));
  CHECK(allreduce_seconds(1000, 3, l, e) == doctest::Approx(allreduce_ring_seconds(1000, 3, l, e)));
  CHECK(allreduce_seconds(8e6, 1, l, e) == 0.0);
  CHECK(allreduce_seconds(0, 2, l, e) == 0.0);
}

TEST_CASE("the cost model's allreduce rule is the transport's") {
  for (int ranks : {1, 2, 3, 4, 6, 8, 16, 64})
    for (std::int64_t bytes : {std::int64_t{4}, std::int64_t{65532}, std::int64_t{65536}, std::int64_t{65540},
                               std::int64_t{1} << 20, (std::int64_t{1} << 20) + 4, std::int64_t{1} << 30}) {
      CAPTURE(ranks);
      CAPTURE(bytes);
      CHECK(allreduce_uses_recursive_doubling(static_cast<double>(bytes), ranks) ==
            (transport::allreduce_algorithm_for(bytes, ranks) == transport::allreduce_algorithm::recursive_doubling));
    }
}

TEST_CASE("the pipeline bubble in closed form") {
  CHECK(bubble_fraction(1, 8) == 0.0);
  CHECK(bubble_fraction(4, 8) == doctest::Approx(3.0 / 11.0));
  CHECK(bubble_fraction(2, 1) == doctest::Approx(0.5));
}

TEST_CASE("a matmul's profile: 2 m n k FLOPs and the bytes of its operands, per row") {
  graph g;
  var x = g.input("x", {3, 4});
  var w = g.parameter("w", {4, 5}, init_spec::zeros());
  var y = matmul(x, w);
  (void)y;
  op_profile p = profile_of(g, g.nodes().back(), 3);
  CHECK(p.gemm);
  CHECK(p.flops == doctest::Approx(2.0 * 3 * 5 * 4 / 3));
  CHECK(p.bytes == doctest::Approx((12 + 20 + 15) * 4.0 / 3));
}

TEST_CASE("the analysis' affine costs equal a direct build at another batch size") {
  auto model = [](graph& g, std::int64_t rows) { return test::toy_mlp(g, {12, 32, 24, 7}, rows); };
  auto a = analyze_model(model, 2);
  REQUIRE(a);
  const model_analysis& an = **a;
  graph g7;
  var loss = model(g7, 7);
  REQUIRE(autodiff(g7, loss));
  REQUIRE(g7.nodes().size() == an.g->nodes().size());
  for (std::size_t i = 0; i < g7.nodes().size(); ++i) {
    op_profile direct = profile_of(g7, g7.nodes()[i], 1);
    op_profile affine = an.node_cost[i].at(7);
    CHECK(affine.flops == doctest::Approx(direct.flops));
    CHECK(affine.bytes == doctest::Approx(direct.bytes));
  }
  // parameters: 12*32+32 + 32*24+24 + 24*7+7 floats
  CHECK(an.param_bytes == doctest::Approx(4.0 * (12 * 32 + 32 + 32 * 24 + 24 + 24 * 7 + 7)));
  // bytes across each cut: every value made before j and read at or after j, counted directly
  const std::size_t forward = an.forward_nodes();
  for (std::size_t j = 1; j < forward; ++j) {
    double direct = 0;
    std::vector<bool> seen(g7.num_values(), false);
    for (std::size_t i = j; i < forward; ++i)
      for (auto v : g7.nodes()[i].inputs) {
        auto p = g7.value(v).producer;
        if (p < 0 || static_cast<std::size_t>(p) >= j || seen[static_cast<std::size_t>(v)]) continue;
        seen[static_cast<std::size_t>(v)] = true;
        direct += static_cast<double>(g7.value(v).type.shape.numel()) * 4.0;
      }
    CHECK(an.cut_bytes(j, 7) == doctest::Approx(direct));
  }
  // the layer boundaries are where fc2 and fc3 begin
  CHECK(an.boundaries.size() >= 2);
}

TEST_CASE("refit: measured task times twice the prediction halve the efficiencies") {
  efficiency e{.gemm = 0.6, .memory = 0.5, .link = 0.8, .per_op_seconds = 2e-6};
  stage_prediction p{.forward_s = 1.0, .backward_s = 2.0, .update_s = 0.5, .update_comm_s = 0.3};
  // compute twice as slow; the reduction 0.9 measured against 0.3 predicted: three times
  auto r = refit({{p, {2.0, 4.0, 0.9}}, {p, {2.0, 4.0, 0.9}}}, e);
  CHECK(r.changed);
  CHECK(r.compute_factor == doctest::Approx(2.0));
  CHECK(r.reduce_factor == doctest::Approx(3.0));
  CHECK(r.eff.gemm == doctest::Approx(0.3));
  CHECK(r.eff.memory == doctest::Approx(0.25));
  CHECK(r.eff.per_op_seconds == doctest::Approx(4e-6));
  CHECK(r.eff.link == doctest::Approx(0.8 / 3));
  // and the refit model predicts what was measured
  device_speed d{1e9, 1e9};
  op_profile gemm{1e9, 1.0, true};
  CHECK(compute_seconds(gemm, d, r.eff) == doctest::Approx(2 * compute_seconds(gemm, d, e)).epsilon(1e-9));
  // nothing observed: unchanged
  CHECK(!refit({}, e).changed);
}

TEST_CASE("a profile's refits: a running mean, geometric for efficiencies, arithmetic for seconds") {
  efficiency old;
  old.gemm = 0.8, old.link = 0.2, old.per_step_seconds = 0, old.per_task_seconds = 10e-6;
  efficiency fit = old;
  fit.gemm = 0.2, fit.link = 0.8, fit.per_step_seconds = 100e-6, fit.per_task_seconds = 30e-6;
  // the first refit replaces the calibration's defaults outright
  CHECK(refit_weight(1) == 1.0);
  efficiency first = blend(old, fit, refit_weight(1));
  CHECK(first.gemm == fit.gemm);
  CHECK(first.per_step_seconds == fit.per_step_seconds);
  // the second is the mean of two runs: sqrt(0.8 x 0.2) = 0.4 either way round
  CHECK(refit_weight(2) == 0.5);
  efficiency second = blend(old, fit, refit_weight(2));
  CHECK(second.gemm == doctest::Approx(0.4));
  CHECK(second.link == doctest::Approx(0.4));
  CHECK(second.memory == doctest::Approx(old.memory));
  CHECK(second.per_step_seconds == doctest::Approx(50e-6));
  CHECK(second.per_task_seconds == doctest::Approx(20e-6));
  // three runs whose fits say 1, 2 and 4 times slow: the mean of the logarithms, 2 times
  efficiency e = old, slower = old;
  int n = 0;
  for (double factor : {1.0, 2.0, 4.0}) {
    slower.gemm = old.gemm / factor;
    e = blend(e, slower, refit_weight(++n));
  }
  CHECK(e.gemm == doctest::Approx(old.gemm / 2));
  // long histories still follow the machine: at least 1/8 weight
  CHECK(refit_weight(100) == doctest::Approx(1.0 / max_refits_averaged));
  CHECK(blend(old, fit, 0).gemm == doctest::Approx(old.gemm));
}

TEST_CASE("the overhead terms' fit: exact data is recovered, a term the data push below zero is held at zero") {
  // columns: tasks on the critical path, 1 (per step), extra ranks — as the calibration plans give them
  const std::vector<std::array<double, 3>> a = {{2, 1, 0}, {2, 1, 1}, {4, 1, 1}, {18, 1, 1}, {2, 1, 3}, {16, 1, 3}};
  const std::array<double, 3> truth{40e-6, 300e-6, 120e-6};
  std::vector<double> y;
  for (const auto& row : a) y.push_back(row[0] * truth[0] + row[1] * truth[1] + row[2] * truth[2]);
  auto x = fit_nonnegative(a, y);
  for (int k = 0; k < 3; ++k)
    CHECK(x[static_cast<std::size_t>(k)] == doctest::Approx(truth[static_cast<std::size_t>(k)]).epsilon(1e-9));
  // step times that fall as ranks are added: the per-rank term would be negative, so it is 0
  // and the others are the least-squares fit without it
  std::vector<double> falling;
  for (const auto& row : a) falling.push_back(row[0] * 40e-6 + 300e-6 - row[2] * 50e-6);
  auto held = fit_nonnegative(a, falling);
  CHECK(held[2] == 0.0);
  CHECK(held[0] >= 0.0);
  CHECK(held[1] >= 0.0);
  // nothing to explain: all zero
  auto none = fit_nonnegative(a, std::vector<double>(a.size(), -1e-3));
  CHECK((none[0] == 0.0 && none[1] == 0.0 && none[2] == 0.0));
}

TEST_CASE("the optimizer's update: at the measured rate when there is one, else as memory traffic") {
  efficiency e;
  e.memory = 0.5;
  e.per_op_seconds = 1e-6;
  device_speed d;
  d.flops_per_s = 1e11;
  d.memory_bytes_per_s = 1e10;
  // 28 MB of parameters, gradients and state: 28e6 / (1e10 x 0.5) + 1 us
  CHECK(optimizer_seconds(28e6, d, e) == doctest::Approx(5.6e-3 + 1e-6));
  d.optimizer_bytes_per_s = 28e9;  // measured: no efficiency on top
  CHECK(optimizer_seconds(28e6, d, e) == doctest::Approx(1e-3 + 1e-6));
  CHECK(optimizer_seconds(0, d, e) == 0);
}

TEST_CASE("a GEMM with calibrated arithmetic and traffic rates: both terms, scaled by the GEMM efficiency") {
  efficiency e;
  e.gemm = 0.5;
  e.per_op_seconds = 1e-6;
  device_speed d;
  d.flops_per_s = 1e11;
  d.gemm_bytes_per_s = 1e10;
  d.gemm_packs_operands = true;
  op_profile p{2e8, 1e7, true};  // 2 ms of arithmetic, 1 ms of traffic at the measured rates
  CHECK(compute_seconds(p, d, e) == doctest::Approx((2e-3 + 1e-3) / 0.5 + 1e-6));
  op_profile not_gemm{0, 1e7, false};  // other operations keep the memory roofline
  d.memory_bytes_per_s = 1e10;
  e.memory = 0.5;
  CHECK(compute_seconds(not_gemm, d, e) == doctest::Approx(2e-3 + 1e-6));
}
