// The planner on toy clusters: a case where pipeline parallelism wins, one where tensor
// parallelism wins, one where only a sharded optimizer state fits, one where nothing fits
// (and the planner says what would), placement by topology, and the uniform view of a
// cluster file.
#include <doctest/doctest.h>

#include <iostream>

#include "planner/rank_layout.hpp"
#include "planner/search.hpp"
#include "toy_models.hpp"

using namespace cohort;
using namespace cohort::planner;

namespace {

const model_analysis& analyzed(const std::function<var(graph&, std::int64_t)>& model, int slots) {
  static std::vector<std::unique_ptr<model_analysis>> keep;
  auto a = analyze_model(model, slots);
  REQUIRE(a);
  keep.push_back(std::move(*a));
  return *keep.back();
}

topology two_devices(double link_bytes_per_s, double memory_bytes) {
  topology t;
  t.devices = 2;
  t.devices_per_machine = 2;
  t.speed = {1e11, 2e10};
  t.memory_bytes = memory_bytes;
  t.intra = t.inter = {link_bytes_per_s, 1e-5};
  return t;
}

search_options options(std::int64_t batch, const topology& t) {
  search_options o;
  o.batch = batch;
  o.topo = t;
  return o;
}

}  // namespace

TEST_CASE("pipeline parallelism wins: large weights, small activations, a slow link") {
  // 8 layers of 1024 x 1024 (32 MB of weights): dp would allreduce all of them each step,
  // tp two activations per layer; a pipeline sends one 64 x 1024 activation per micro-batch
  const auto& a = analyzed(
      [](graph& g, std::int64_t r) {
        return test::toy_mlp(g, {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}, r);
      },
      1);
  search_options o = options(64, two_devices(1e8, 1e12));
  auto ranked = rank_plans(a, o);
  REQUIRE(ranked);
  REQUIRE(!ranked->empty());
  INFO(explain(*ranked, 12));
  const planned& best = ranked->front();
  CHECK(best.plan.pp == 2);
  CHECK(best.plan.micro_batches >= 4);
  CHECK(best.fits);
  // balanced: the cut falls within a layer of the middle
  REQUIRE(best.cuts.size() == 1);
  // (each layer is matmul, bias, relu: the middle is node 12)
  CHECK(best.cuts[0] >= 9);
  CHECK(best.cuts[0] <= 15);
}

TEST_CASE("tensor parallelism wins: a batch of one row, a fast link") {
  // one row: no data parallelism, no micro-batches to fill a pipeline; tp halves the work
  const auto& a = analyzed([](graph& g, std::int64_t r) { return test::toy_mlp(g, {2048, 4096, 2048, 10}, r); }, 1);
  search_options o = options(1, two_devices(1e11, 1e12));
  auto ranked = rank_plans(a, o);
  REQUIRE(ranked);
  INFO(explain(*ranked, 12));
  CHECK(ranked->front().plan.tp == 2);
  CHECK(ranked->front().plan.pp == 1);
}

TEST_CASE("only a sharded optimizer state fits") {
  // one wide layer without tp annotations (tp would not split it) that a pipeline cannot
  // split either; AdamW: parameters + gradients + 2 slots = 16 bytes per parameter, sharded
  // over 2: 12 bytes per parameter
  const auto& a = analyzed([](graph& g, std::int64_t r) { return test::toy_wide_linear(g, 1024, 4096, r); }, 2);
  const double params = 1024.0 * 4096 + 4096;
  search_options o = options(8, two_devices(1e10, params * 14.0 / 0.9));
  auto ranked = rank_plans(a, o);
  REQUIRE(ranked);
  INFO(explain(*ranked, 20));
  REQUIRE(ranked->front().fits);
  for (const planned& p : *ranked) CHECK(p.fits == p.plan.shard_params);
  CHECK(ranked->front().peak_memory_bytes == doctest::Approx(params * 12.0).epsilon(0.01));
}

TEST_CASE("nothing fits: every plan rejected, and the planner says what would") {
  const auto& a = analyzed([](graph& g, std::int64_t r) { return test::toy_mlp(g, {512, 2048, 2048, 512, 10}, r); }, 2);
  search_options o = options(32, two_devices(1e10, 4e6));
  auto ranked = rank_plans(a, o);
  REQUIRE(ranked);
  REQUIRE(!ranked->empty());
  for (const planned& p : *ranked) {
    CHECK(!p.fits);
    CHECK(p.rejected.find("GB per device") != std::string::npos);
  }
  std::string advice = what_would_fit(a, o);
  INFO(advice);
  CHECK(advice.find("the leanest plan on 2 devices") != std::string::npos);
  CHECK(advice.find("would fit: ") != std::string::npos);
  CHECK(advice.find(" devices (") != std::string::npos);  // more devices
  CHECK(advice.find("devices with") != std::string::npos);
}

TEST_CASE("GPipe holds every micro-batch in flight, 1F1B at most pp: more memory, same time on equal stages") {
  const auto& a = analyzed([](graph& g, std::int64_t r) { return test::toy_mlp(g, {256, 256, 256, 256, 10}, r); }, 1);
  search_options o = options(64, two_devices(1e10, 1e12));
  parallel_plan one{.pp = 2, .micro_batches = 8};
  parallel_plan gpipe = one;
  gpipe.schedule = schedule_kind::gpipe;
  auto x = evaluate_plan(a, one, o), y = evaluate_plan(a, gpipe, o);
  REQUIRE(x);
  REQUIRE(y);
  CHECK(y->peak_memory_bytes > x->peak_memory_bytes);
  CHECK(x->cuts == y->cuts);
}

TEST_CASE("tensor-parallel groups stay inside a machine unless allowed across") {
  const auto& a = analyzed([](graph& g, std::int64_t r) { return test::toy_mlp(g, {64, 64, 64, 10}, r); }, 1);
  search_options o = options(16, topology{});
  o.topo.devices = 4;
  o.topo.devices_per_machine = 2;
  auto ranked = rank_plans(a, o);
  REQUIRE(ranked);
  int widest = 0;
  for (const planned& p : *ranked) widest = std::max(widest, p.plan.tp);
  CHECK(widest == 2);
  o.tp_across_machines = true;
  ranked = rank_plans(a, o);
  widest = 0;
  for (const planned& p : *ranked) widest = std::max(widest, p.plan.tp);
  CHECK(widest == 4);
}

TEST_CASE("a given plan that the model cannot take is an error, not a guess") {
  const auto& a = analyzed([](graph& g, std::int64_t r) { return test::toy_mlp(g, {8, 8, 10}, r); }, 1);
  search_options o = options(6, topology{});
  CHECK(!evaluate_plan(a, {.dp = 4, .micro_batches = 2}, o));          // 6 rows for 8 shares
  CHECK(evaluate_plan(a, {.dp = 4}, o).ok());                          // 6 rows over 4 replicas: 2 2 1 1
  CHECK(!evaluate_plan(a, {.pp = 2, .micro_batches = 2}, o, {1, 2}));  // 2 cuts for 2 stages
}

TEST_CASE("the uniform view of a cluster: its accelerators, the slowest of them, its links") {
  auto c = load_cluster_json(R"({"cohort_cluster": 1,
    "inter_link": {"bandwidth_gb_per_s": 25, "latency_us": 10},
    "machines": [
      {"hostname": "a", "intra_link": {"bandwidth_gb_per_s": 300, "latency_us": 2}, "devices": [
         {"kind": "gpu", "count": 4, "model": "A100", "tflops": {"f32": 19.5, "f16": 312}, "memory_gb": 80,
          "memory_bandwidth_gb_per_s": 2039},
         {"kind": "cpu", "count": 1, "model": "EPYC", "tflops": {"f32": 1}, "memory_gb": 512, "memory_bandwidth_gb_per_s": 200}]},
      {"hostname": "b", "intra_link": {"bandwidth_gb_per_s": 300, "latency_us": 2}, "devices": [
         {"kind": "gpu", "count": 4, "model": "A100-40", "tflops": {"f32": 19.5, "f16": 312}, "memory_gb": 40,
          "memory_bandwidth_gb_per_s": 1555}]}]})",
                             "test");
  if (!c) FAIL(c.error().message);
  auto t = topology_of(*c, /*half_precision=*/true);
  REQUIRE(t);
  CHECK(t->devices == 8);
  CHECK(t->devices_per_machine == 4);
  CHECK(t->speed.flops_per_s == doctest::Approx(312e12));
  CHECK(t->speed.memory_bytes_per_s == doctest::Approx(1555e9));
  CHECK(t->memory_bytes == doctest::Approx(40e9));
  CHECK(t->intra.bandwidth_bytes_per_s == doctest::Approx(300e9));
  CHECK(t->inter.bandwidth_bytes_per_s == doctest::Approx(25e9));
  CHECK(t->inter.latency_s == doctest::Approx(10e-6));
}

TEST_CASE("a heterogeneous cluster: the embedding goes to the host CPUs when only that fits, not otherwise") {
  // 100,000 x 64 table: 25.6 MB of parameters, 102 MB with gradients and AdamW state
  const auto& a = analyzed([](graph& g, std::int64_t r) { return test::toy_embedding_model(g, 100000, 64, r); }, 2);
  topology t = two_devices(1e10, 50e6);
  t.host = topology::host_side{.devices = 1, .speed = {1e10, 1e10}, .memory_bytes = 64e9, .link = {16e9, 5e-6}};
  search_options o = options(32, t);
  auto ranked = rank_plans(a, o);
  REQUIRE(ranked);
  INFO(explain(*ranked, 12));
  REQUIRE(ranked->front().fits);
  CHECK(ranked->front().embedding_on_host);
  for (const planned& p : *ranked) CHECK(p.fits == p.embedding_on_host);
  CHECK(describe(ranked->front()).find("embedding-on-host") != std::string::npos);
  // with memory to spare, the slow host only costs time: the embedding stays
  o.topo.memory_bytes = 64e9;
  ranked = rank_plans(a, o);
  REQUIRE(ranked);
  INFO(explain(*ranked, 12));
  CHECK(!ranked->front().embedding_on_host);
}

TEST_CASE("where ranks share cores, the reduction is predicted as the runtime times it: slowed with its task") {
  // dp2 on one core: both replicas reduce at once, each at half the core's speed
  const auto& a = analyzed([](graph& g, std::int64_t r) { return test::toy_mlp(g, {256, 256, 256}, r); }, 1);
  parallel_plan p;
  p.dp = 2;
  search_options alone = options(64, two_devices(1e9, 1e12));
  search_options sharing = alone;
  sharing.topo.shared_cores = 1;
  auto own = evaluate_plan(a, p, alone, {}, false);
  auto shared = evaluate_plan(a, p, sharing, {}, false);
  REQUIRE(own);
  REQUIRE(shared);
  REQUIRE(own->stages.size() == 1);
  CHECK(own->stages[0].update_comm_s > 0);
  CHECK(own->stages[0].update_comm_s < own->stages[0].update_s);  // the optimizer is the rest
  CHECK(shared->stages[0].update_comm_s == doctest::Approx(2 * own->stages[0].update_comm_s));
  CHECK(shared->stages[0].update_s == doctest::Approx(2 * own->stages[0].update_s));
}

TEST_CASE("near ties go to the plan with fewer synchronisations, clear differences do not") {
  auto plan = [](double step_s, bool sharded, int micro_batches, bool fits = true) {
    planned p;
    p.plan = {.dp = 2,
              .tp = 1,
              .pp = 2,
              .micro_batches = micro_batches,
              .schedule = schedule_kind::one_f_one_b,
              .shard_params = sharded};
    p.step_s = step_s;
    p.fits = fits;
    return p;
  };
  SUBCASE("a sharded twin 0.3 % faster yields to the unsharded one") {
    std::vector<planned> r{plan(1.000, true, 1), plan(1.003, false, 1), plan(1.2, false, 2)};
    CHECK(prefer_simpler_near_ties(r) == 1);  // the fastest is now second
    CHECK(!r[0].plan.shard_params);
    CHECK(r[0].step_s == 1.003);
    CHECK(r[1].step_s == 1.000);
    CHECK(r[2].step_s == 1.2);
  }
  SUBCASE("2 % apart is not a tie") {
    std::vector<planned> r{plan(1.000, true, 1), plan(1.020, false, 1)};
    CHECK(prefer_simpler_near_ties(r) == 0);
    CHECK(r[0].plan.shard_params);
  }
  SUBCASE("among unsharded near ties, fewer micro-batches; the simplest need not be next to the fastest") {
    std::vector<planned> r{plan(1.000, false, 8), plan(1.004, true, 1), plan(1.006, false, 4), plan(1.009, false, 2)};
    CHECK(prefer_simpler_near_ties(r) == 1);
    CHECK(r[0].plan.micro_batches == 2);
    CHECK(r[1].plan.micro_batches == 8);
    CHECK(r[2].plan.shard_params);
    CHECK(r[3].plan.micro_batches == 4);
  }
  SUBCASE("rejected plans never win a tie, and a list of only rejected plans stays as it is") {
    std::vector<planned> r{plan(1.000, true, 1), plan(1.001, false, 1, false)};
    CHECK(prefer_simpler_near_ties(r) == 0);
    CHECK(r[0].plan.shard_params);
    std::vector<planned> none{plan(1.0, true, 1, false), plan(0.5, false, 1, false)};
    CHECK(prefer_simpler_near_ties(none) == 0);
    CHECK(none[0].step_s == 1.0);
  }
}

TEST_CASE("ranks of a lost process go to the processes that remain, fewest ranks first") {
  using planner::rank_layout;
  CHECK(rank_layout::placed(4, {true, true}) == rank_layout::blocks(4, 2));  // nobody lost: the blocks
  CHECK(rank_layout::placed(2, {true, false}) == std::vector<int>{0, 0});
  CHECK(rank_layout::placed(4, {true, true, false, true}) == std::vector<int>{0, 1, 0, 3});
  CHECK(rank_layout::placed(6, {true, false, true}) == std::vector<int>{0, 0, 0, 2, 2, 2});
  CHECK(rank_layout::placed(8, {false, true, true, false}) == std::vector<int>{1, 2, 1, 1, 2, 2, 1, 2});
  CHECK(rank_layout::placed(2, {false, false}).empty());
}

TEST_CASE("ranks that do not divide over the job's slots sit in near-equal blocks, then on the live processes") {
  using planner::rank_layout;
  CHECK(rank_layout::blocks(4, 3) == std::vector<int>{0, 0, 1, 2});
  CHECK(rank_layout::blocks(6, 4) == std::vector<int>{0, 0, 1, 1, 2, 3});
  CHECK(rank_layout::blocks(2, 4) == std::vector<int>{0, 1});
  // a job of 3 slots started with 2 processes: dp4 over its two
  CHECK(rank_layout::placed(4, {true, true, false}) == std::vector<int>{0, 0, 1, 1});
  // 6 ranks re-planned for the 3 processes that remain of 4
  CHECK(rank_layout::placed(6, {true, true, true, false}) == std::vector<int>{0, 0, 1, 1, 2, 2});
  for (int ranks = 1; ranks <= 12; ++ranks)
    for (int processes = 1; processes <= 6; ++processes) {
      const auto b = rank_layout::blocks(ranks, processes);
      REQUIRE(static_cast<int>(b.size()) == ranks);
      CHECK(std::is_sorted(b.begin(), b.end()));
      CHECK(b.back() < processes);
    }
}

TEST_CASE("interleaved 1F1B: four stages on two ranks shrink the bubble, a slow link makes it lose") {
  // 8 equal layers: pp2 cut into 4 stages (rank 0: stages 0 and 2, rank 1: 1 and 3)
  const auto& a = analyzed(
      [](graph& g, std::int64_t r) {
        return test::toy_mlp(g, {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}, r);
      },
      1);
  parallel_plan one{.pp = 2, .micro_batches = 4}, two = one;
  two.virtual_stages = 2;
  search_options fast = options(64, two_devices(1e12, 1e12));
  auto p1 = evaluate_plan(a, one, fast);
  auto p2 = evaluate_plan(a, two, fast);
  REQUIRE(p1);
  REQUIRE(p2);
  CHECK(describe(*p2) == "dp1 tp1 pp2 v2 m4 1f1b");
  CHECK(p2->cuts.size() == 3);
  REQUIRE(p2->stages.size() == 2);  // per pipeline rank, as the runtime measures its workers
  // with a free link the bubble is (pp - 1) / v of a micro-batch: 1/5 of the span for pp2 m4,
  // 1/(2 x 4 + 1) for v2 (the stages are near equal, not exactly)
  CHECK(p1->bubble == doctest::Approx(0.2).epsilon(0.05));
  CHECK(p2->bubble == doctest::Approx(1.0 / 9).epsilon(0.1));
  CHECK(p2->step_s < p1->step_s);
  // both ranks' compute, the same work regrouped
  const double work1 = p1->stages[0].forward_s + p1->stages[0].backward_s + p1->stages[1].forward_s +
                       p1->stages[1].backward_s,
               work2 = p2->stages[0].forward_s + p2->stages[0].backward_s + p2->stages[1].forward_s +
                       p2->stages[1].backward_s;
  CHECK(work2 == doctest::Approx(work1).epsilon(0.02));
  // a slow link: twice the transfers cost more than the bubble saves
  search_options slow = options(64, two_devices(1e8, 1e12));
  auto s1 = evaluate_plan(a, one, slow);
  auto s2 = evaluate_plan(a, two, slow);
  REQUIRE(s1);
  REQUIRE(s2);
  CHECK(s2->step_s > s1->step_s);
  // the search considers it (1F1B, micro-batches in groups of pp) and never for a plan without a pipeline
  auto ranked = rank_plans(a, fast);
  REQUIRE(ranked);
  bool any = false;
  for (const auto& p : *ranked) {
    if (p.plan.virtual_stages == 1) continue;
    any = true;
    CHECK(p.plan.pp >= 2);
    CHECK(p.plan.micro_batches % p.plan.pp == 0);
    CHECK(p.plan.schedule == schedule_kind::one_f_one_b);
    CHECK(p.cuts.size() + 1 == static_cast<std::size_t>(p.plan.stages()));
  }
  CHECK(any);
  fast.virtual_stages = {1};
  auto plain = rank_plans(a, fast);
  REQUIRE(plain);
  for (const auto& p : *plain) CHECK(p.plan.virtual_stages == 1);
}
