// The cost model's terms for planning published runs, against values worked out by hand:
// fused attention's FLOPs, communication overlapped with compute (tensor-parallel collectives
// beside the stage's compute, the data-parallel reduction beside the last backward pass),
// every equal split of a replica's batch into micro-batches, and gradient accumulation on one
// stage only where the whole batch does not fit.
#include <doctest/doctest.h>

#include <algorithm>

#include "apps/models/gpt.hpp"
#include "graph/dsl.hpp"
#include "planner/analysis.hpp"
#include "planner/search.hpp"
#include "toy_models.hpp"

using namespace cohort;
using namespace cohort::planner;

namespace {

std::unique_ptr<model_analysis> analyzed(const std::function<var(graph&, std::int64_t)>& model, int slots) {
  auto a = analyze_model(model, slots);
  REQUIRE(a);
  return std::move(*a);
}

search_options on_devices(int devices, std::int64_t batch, double memory_bytes = 80e9) {
  search_options o;
  o.batch = batch;
  o.topo.devices = o.topo.devices_per_machine = devices;
  o.topo.speed = {100e12, 2e12};
  o.topo.memory_bytes = memory_bytes;
  o.topo.intra = o.topo.inter = {100e9, 5e-6};
  o.eff = efficiency{}.without_runtime_overhead();
  return o;
}

// toy_mlp {1024, 4096, 1024, 10}: the model most cases plan, and its parameter count
var mlp_1024(graph& g, std::int64_t rows) { return test::toy_mlp(g, {1024, 4096, 1024, 10}, rows); }
constexpr double mlp_1024_params = 1024.0 * 4096 + 4096 + 4096.0 * 1024 + 1024 + 1024.0 * 10 + 10;

// `p` predicted with one of the planner's terms off, then on
struct off_on {
  planned off, on;
};
off_on with_term(const model_analysis& a, const parallel_plan& p, search_options o, bool search_options::*term) {
  o.*term = false;
  auto off = evaluate_plan(a, p, o);
  o.*term = true;
  auto on = evaluate_plan(a, p, o);
  REQUIRE(off);
  REQUIRE(on);
  return {std::move(*off), std::move(*on)};
}

}  // namespace

TEST_CASE("fused attention costs two GEMMs forward and five backward, a causal row only its visible keys") {
  graph g;
  var q = g.input("q", {2, 3, 8, 4}), k = g.input("k", {2, 3, 8, 4}), v = g.input("v", {2, 3, 8, 4});
  attention(q, k, v, 0.5f, /*causal=*/true);
  attention(q, k, v, 0.5f, /*causal=*/false);
  const double slices = 2 * 3, causal_pairs = 8 * 9 / 2, all_pairs = 8 * 8, d = 4;
  op_profile causal = profile_of(g, g.nodes()[0], 1), full = profile_of(g, g.nodes()[1], 1);
  CHECK(causal.flops == 4 * slices * causal_pairs * d);
  CHECK(full.flops == 4 * slices * all_pairs * d);
  CHECK(causal.gemm);
  CHECK(causal.attention);
  CHECK(causal.bytes == 4 * 4.0 * (2 * 3 * 8 * 4));  // q, k, v and the result, never the [8, 8] scores
  graph with_grad;
  var q2 = with_grad.parameter("q", {1, 8, 4}, init_spec::zeros());
  var loss = sum(attention(q2, q2, q2, 1.f, true));
  auto grads = autodiff(with_grad, loss);
  REQUIRE(grads);
  const auto it = std::find_if(with_grad.nodes().begin(), with_grad.nodes().end(),
                               [](const node& n) { return n.kind == op_kind::attention_grad; });
  REQUIRE(it != with_grad.nodes().end());
  CHECK(profile_of(with_grad, *it, 1).flops == 10.0 * 1 * (8 * 9 / 2) * 4);
  // the device profile's attention efficiency prices it; without one, the GEMM table at its size
  efficiency e;
  e.gemm = 0.8, e.attention = 0.5, e.per_op_seconds = 0;
  device_speed dev{.flops_per_s = 1e12, .memory_bytes_per_s = 1e15};
  CHECK(compute_seconds(causal, dev, e) == doctest::Approx(causal.flops / (1e12 * 0.5)));
  e.attention = 0;
  CHECK(compute_seconds(causal, dev, e) == doctest::Approx(causal.flops / (1e12 * 0.8)));
}

TEST_CASE("tensor-parallel collectives overlapped: each stage's micro-batch takes the longer of compute and comm") {
  auto a = analyzed(mlp_1024, 2);
  const auto [plain, overlapped] =
      with_term(*a, parallel_plan{.tp = 2}, on_devices(2, 256), &search_options::overlap_tp_comm);
  const auto &p = plain.stages[0], &v = overlapped.stages[0];
  REQUIRE(p.compute_comm_s > 0);
  REQUIRE(p.compute_comm_s < (p.forward_s + p.backward_s) / 2);  // comm shorter than compute: hidden whole
  CHECK(p.forward_s + p.backward_s - (v.forward_s + v.backward_s) == doctest::Approx(p.compute_comm_s));
  CHECK(overlapped.step_s == doctest::Approx(plain.step_s - p.compute_comm_s));
}

TEST_CASE("overlapped communication: what a pass cannot hide, hand-computed") {
  // backward parts of 2, 1, 1 s; their reductions 1, 1, 3 s issued as each part is done:
  // link busy 2-3, 3-4, then the last part's 3 s from the pass's end at 4 s: 3 s exposed
  CHECK(exposed_after_backward({2, 1, 1}, {1, 1, 3}) == doctest::Approx(3.0));
  // a slow link: 2-5, 5-6 (the pass ends at 4), 6-7: 3 s exposed, though the last part's is 1
  CHECK(exposed_after_backward({2, 1, 1}, {3, 1, 1}) == doctest::Approx(3.0));
  CHECK(exposed_after_backward({2, 1, 1}, {0, 0, 0}) == 0);
  CHECK(exposed_after_backward({}, {}) == 0);
  // gathers of 1, 1, 3 s from the start before forward parts of 2, 1, 1 s: the pass waits 1 s
  // for the first, runs 1-3, the second is in at 2: 3-4, the third is in at 5: waits 1 s, 5-6
  CHECK(exposed_before_forward({2, 1, 1}, {1, 1, 3}) == doctest::Approx(2.0));
  CHECK(exposed_before_forward({2, 1, 1}, {0, 0, 0}) == 0);
}

TEST_CASE(
    "the data-parallel reduction overlapped: each layer's share as its backward is done and the first layer's "
    "exposed") {
  auto a = analyzed(mlp_1024, 2);
  // the first matmul's weight: the last gradient the backward pass makes and the first weight
  // the forward pass needs; with a 4096-row pass every other share is hidden
  const double first = 1024.0 * 4096 / mlp_1024_params;
  for (bool sharded : {false, true}) {
    const auto [plain, overlapped] = with_term(*a, parallel_plan{.dp = 2, .shard_params = sharded}, on_devices(2, 4096),
                                               &search_options::overlap_dp_reduction);
    const auto &p = plain.stages[0], &v = overlapped.stages[0];
    REQUIRE(p.update_comm_s > 0);
    CHECK(p.update_comm_s < p.backward_s);
    // unsharded: the allreduce's first-layer share; sharded: that of the reduce-scatter after
    // the pass and of the all-gather before it
    CHECK(v.update_comm_s == doctest::Approx(first * p.update_comm_s));
    CHECK(p.update_s - v.update_s == doctest::Approx(p.update_comm_s - v.update_comm_s));
  }
}

TEST_CASE("micro-batches: every equal split of a replica's batch, and on one stage only for the memory they save") {
  auto a = analyzed([](graph& g, std::int64_t rows) { return test::toy_mlp(g, {64, 64, 64, 10}, rows); }, 2);
  search_options o = on_devices(2, 24);
  auto ranked = rank_plans(*a, o);
  REQUIRE(ranked);
  auto has = [&](int dp, int pp, int m) {
    return std::any_of(ranked->begin(), ranked->end(), [&](const planned& p) {
      return p.plan.dp == dp && p.plan.pp == pp && p.plan.micro_batches == m;
    });
  };
  CHECK(has(1, 2, 3));  // 24 = 3 x 8: not a power of two
  CHECK(has(1, 2, 24));
  CHECK(has(2, 1, 1));
  CHECK(!has(2, 1, 3));  // the whole batch fits on one stage: no gradient accumulation
  CHECK(!has(1, 1, 2));
  // a device too small for the whole batch's activations: accumulation over micro-batches is a candidate
  auto big = analyzed([](graph& g, std::int64_t rows) { return test::toy_mlp(g, {4096, 4096, 10}, rows); }, 0);
  search_options small = on_devices(1, 4096, /*memory_bytes=*/0.25e9);
  auto tight = rank_plans(*big, small);
  REQUIRE(tight);
  REQUIRE(!tight->empty());
  CHECK(tight->front().fits);
  CHECK(tight->front().plan.micro_batches > 1);
  CHECK(tight->front().plan.pp == 1);
}

TEST_CASE("sparse embedding tables: the data-parallel step prices their gathered entries, not a dense table") {
  // one table of 100,000 x 16 looked up once per sample, a 16 x 1 head: dense, dp2 allreduces the
  // table's 6.4 MB gradient and updates every row; sparse (the runtime's compile_options), it
  // allreduces the head's 64 bytes, all-gathers both replicas' entries and updates those rows
  constexpr std::int64_t table_rows = 100000, dim = 16, batch = 256;
  auto model = [](graph& g, std::int64_t rows) {
    var table = g.parameter("emb", {table_rows, dim}, init_spec::normal(0.01f));
    var pooled = embedding_bag(table, g.input("ids", {rows, 1}, dtype::i32));
    var w = g.parameter("w", {dim, 1}, init_spec::normal(0.1f));
    return bce_with_logits(reshape(matmul(pooled, w), {rows}), g.input("y", {rows}));
  };
  auto dense = analyze_model(model, 1);
  auto sparse = analyze_model(model, 1, /*sparse_tables=*/true);
  REQUIRE(dense);
  REQUIRE(sparse);
  REQUIRE((*sparse)->grads.sparse_grads.size() == 1);
  search_options o = on_devices(2, batch);
  const parallel_plan dp2{.dp = 2};
  auto d = evaluate_plan(**dense, dp2, o);
  auto s = evaluate_plan(**sparse, dp2, o);
  REQUIRE(d);
  REQUIRE(s);
  const link_cost& link = o.topo.intra;
  const double table_bytes = table_rows * dim * 4.0, head_bytes = dim * 4.0;
  // one replica's entries per step: 128 ids, each a 4-byte row and 16 values
  const double entries = (batch / 2) * (4.0 + dim * 4.0);
  CHECK(d->stages[0].update_comm_s ==
        doctest::Approx(allreduce_seconds(table_bytes + head_bytes, 2, link, o.eff)).epsilon(1e-9));
  CHECK(s->stages[0].update_comm_s == doctest::Approx(allreduce_seconds(head_bytes, 2, link, o.eff) +
                                                      all_gather_ring_seconds(2 * entries, 2, link, o.eff))
                                          .epsilon(1e-9));
  // the update streams the head and at most both replicas' 256 touched rows, not 100,000
  const double updated = head_bytes + 256 * dim * 4.0;
  CHECK(s->stages[0].update_s - s->stages[0].update_comm_s ==
        doctest::Approx(optimizer_seconds(updated * (3.0 + 2.0), o.topo.speed, o.eff)).epsilon(1e-9));
  CHECK(s->step_s < d->step_s);
  // the table and its state live on every replica either way; its gradient only where it is
  // dense: sparse, a step's entries stand in its place
  CHECK(s->peak_memory_bytes == doctest::Approx(d->peak_memory_bytes - table_bytes + entries).epsilon(1e-9));
}

TEST_CASE("sequence parallelism: tp ranks split the work they would repeat and its activations") {
  auto a = analyzed(mlp_1024, 2);
  // compute only (a link that costs nothing), at one efficiency for every size: each rank of
  // a sequence-parallel tp2 group does half the work one rank does alone
  search_options o = on_devices(2, 256);
  o.eff.per_op_seconds = 0;
  o.topo.intra = o.topo.inter = {1e30, 0};
  auto alone = evaluate_plan(*a, parallel_plan{}, o);
  auto repeated = evaluate_plan(*a, parallel_plan{.tp = 2}, o);
  o.sequence_parallel = true;
  auto split = evaluate_plan(*a, parallel_plan{.tp = 2}, o);
  REQUIRE(alone);
  REQUIRE(repeated);
  REQUIRE(split);
  CHECK(split->stages[0].forward_s == doctest::Approx(alone->stages[0].forward_s / 2).epsilon(1e-9));
  CHECK(split->stages[0].backward_s == doctest::Approx(alone->stages[0].backward_s / 2).epsilon(1e-9));
  CHECK(repeated->stages[0].forward_s > split->stages[0].forward_s * 1.001);  // the loss, the bias adds: whole
  // the activations a rank keeps (what grows with the batch): half of one rank's alone
  auto activations = [&](const parallel_plan& p, bool sp) {
    search_options at = o;
    at.sequence_parallel = sp;
    auto small = evaluate_plan(*a, p, at);
    at.batch = 512;
    auto large = evaluate_plan(*a, p, at);
    REQUIRE(small);
    REQUIRE(large);
    return large->peak_memory_bytes - small->peak_memory_bytes;
  };
  const double one = activations(parallel_plan{}, false);
  REQUIRE(one > 0);
  CHECK(activations(parallel_plan{.tp = 2}, true) == doctest::Approx(one / 2).epsilon(1e-9));
  CHECK(activations(parallel_plan{.tp = 2}, false) > one / 2 * 1.001);
}

TEST_CASE("sequence parallelism: the forward collectives move what the allreduces moved, the backward half again") {
  // a transformer block as Megatron splits it: q, k, v and fc1 by columns, proj and fc2 by rows
  auto a = analyzed(
      [](graph& g, std::int64_t rows) {
        return apps::build_gpt(g, {.layers = 1, .d = 64, .heads = 4, .seq = 32, .fused_attention = true}, rows).loss;
      },
      2);
  // communication only (compute that costs nothing), a link without latency: times are bytes
  search_options o = on_devices(2, 8);
  o.eff.per_op_seconds = 0;
  o.topo.speed = {1e30, 1e30};
  o.topo.intra = o.topo.inter = {100e9, 0};
  const auto [plain, split] = with_term(*a, parallel_plan{.tp = 2}, o, &search_options::sequence_parallel);
  REQUIRE(plain.stages[0].forward_s > 1e-9);
  REQUIRE(plain.stages[0].backward_s > 1e-9);
  CHECK(split.stages[0].forward_s == doctest::Approx(plain.stages[0].forward_s).epsilon(1e-9));
  // the forward pass allreduces proj's and fc2's outputs; the backward pass the gradients of
  // the block's input (q, k, v) and of fc1's, the same sizes, and fixes up the gradients
  // placed unlike their parameters. Sequence parallelism gathers q/k/v's and fc1's input
  // again for their weight gradients: half of each of those two allreduces more.
  CHECK(split.stages[0].backward_s ==
        doctest::Approx(plain.stages[0].backward_s + 0.5 * plain.stages[0].forward_s).epsilon(1e-12));
}

TEST_CASE("f32 gradients under mixed precision: the reduction moves and the buffer holds 4 bytes per parameter") {
  auto a = analyzed(mlp_1024, 2);
  search_options o = on_devices(2, 256);
  o.half_precision = true;
  o.topo.intra = o.topo.inter = {100e9, 0};
  const double params = mlp_1024_params * 4.0;
  for (bool sharded : {false, true}) {
    const auto [half, full] =
        with_term(*a, parallel_plan{.dp = 2, .shard_params = sharded}, o, &search_options::f32_gradients);
    const link_cost& link = o.topo.intra;
    // the gradients: 2 bytes per parameter, or 4; a sharded plan's parameters gathered in 2 either way
    const double gather = sharded ? all_gather_ring_seconds(params / 2, 2, link, o.eff) : 0;
    auto reduce = [&](double bytes) {
      return sharded ? reduce_scatter_ring_seconds(bytes, 2, link, o.eff) : allreduce_seconds(bytes, 2, link, o.eff);
    };
    CHECK(half.stages[0].update_comm_s == doctest::Approx(reduce(params / 2) + gather).epsilon(1e-9));
    CHECK(full.stages[0].update_comm_s == doctest::Approx(reduce(params) + gather).epsilon(1e-9));
    CHECK(full.peak_memory_bytes - half.peak_memory_bytes == doctest::Approx(params / 2).epsilon(1e-9));
  }
}

TEST_CASE("the loss in f32 passes: bytes per logit forward and backward, the softmax kept in f32") {
  // forward: convert (2 + 4), max (4), shift (8), exp (8), sum (4), divide (8); backward: scale
  // (8), convert back (4 + 2); without mixed precision nothing is converted
  CHECK(f32_loss_bytes_per_logit(false, true) == 38);
  CHECK(f32_loss_bytes_per_logit(true, true) == 14);
  CHECK(f32_loss_bytes_per_logit(false, false) == 32);
  CHECK(f32_loss_bytes_per_logit(true, false) == 8);
  // 64 rows of 1,000 classes: the loss and its gradient are the only nodes whose price changes
  constexpr std::int64_t rows = 64, classes = 1000;
  auto a = analyzed([](graph& g, std::int64_t r) { return test::toy_wide_linear(g, 512, classes, r); }, 2);
  graph at_rows;
  var at_rows_loss = test::toy_wide_linear(at_rows, 512, classes, rows);
  REQUIRE(autodiff(at_rows, at_rows_loss));
  op_profile loss, grad;
  for (const node& n : at_rows.nodes()) {
    if (n.kind == op_kind::softmax_cross_entropy) loss = profile_of(at_rows, n, 1);
    if (n.kind == op_kind::softmax_cross_entropy_grad) grad = profile_of(at_rows, n, 1);
  }
  REQUIRE(loss.bytes > 0);
  REQUIRE(grad.bytes > 0);
  search_options o = on_devices(1, rows);
  o.half_precision = true;
  const auto [plain, f32] = with_term(*a, parallel_plan{}, o, &search_options::f32_loss);
  const double logits = rows * classes, bandwidth = o.topo.speed.memory_bytes_per_s * o.eff.memory;
  // the plain price: the node's operands once, in 2-byte types
  CHECK(f32.stages[0].forward_s - plain.stages[0].forward_s ==
        doctest::Approx((38 * logits - loss.bytes / 2) / bandwidth).epsilon(1e-9));
  CHECK(f32.stages[0].backward_s - plain.stages[0].backward_s ==
        doctest::Approx((14 * logits - grad.bytes / 2) / bandwidth).epsilon(1e-9));
  // the f32 softmax (4 bytes a logit) kept in place of the 2-byte logits
  CHECK(f32.peak_memory_bytes - plain.peak_memory_bytes == doctest::Approx(2 * logits).epsilon(1e-9));
}

TEST_CASE(
    "even layers cut a gpt as Megatron does: its blocks over the stages with the embedding first and the head last") {
  // a head of 4096 logits costs several blocks of d 64: the balanced cutter gives its stage fewer
  auto a = analyzed(
      [](graph& g, std::int64_t rows) {
        return apps::build_gpt(g, {.layers = 6, .d = 64, .heads = 4, .seq = 32, .vocab = 4096}, rows).loss;
      },
      2);
  const graph& g = *a->g;
  REQUIRE(a->layer_starts.size() == 6);
  CHECK(a->layer_starts.front() > 0);  // the embedding comes before the first block
  const std::size_t per_block = a->layer_starts[1] - a->layer_starts[0];
  for (std::size_t k = 0; k < 6; ++k) {
    CHECK(g.nodes()[a->layer_starts[k]].scope.rfind("block" + std::to_string(k), 0) == 0);
    if (k + 1 < 6) CHECK(a->layer_starts[k + 1] - a->layer_starts[k] == per_block);
  }
  auto three = even_layer_cuts(*a, 3);
  REQUIRE(three);
  CHECK(*three == std::vector<std::size_t>{a->layer_starts[2], a->layer_starts[4]});
  auto four = even_layer_cuts(*a, 4);
  REQUIRE_FALSE(four);
  CHECK(four.error().message == "6 layers do not split evenly into 4 pipeline stages");

  search_options o = on_devices(3, 6);
  o.even_layers = true;
  auto pp3 = evaluate_plan(*a, parallel_plan{.pp = 3, .micro_batches = 3}, o);
  REQUIRE(pp3);
  CHECK(pp3->cuts == *three);
  // interleaved over two chunks per rank (and three chunks on two ranks): six stages of one block each
  const std::vector<std::size_t> every_block(a->layer_starts.begin() + 1, a->layer_starts.end());
  auto v2 = evaluate_plan(*a, parallel_plan{.pp = 3, .micro_batches = 3, .virtual_stages = 2}, o);
  REQUIRE(v2);
  CHECK(v2->cuts == every_block);
  o.topo.devices = o.topo.devices_per_machine = 2;
  auto v3 = evaluate_plan(*a, parallel_plan{.pp = 2, .micro_batches = 2, .virtual_stages = 3}, o);
  REQUIRE(v3);
  CHECK(v3->cuts == every_block);
  o.topo.devices = o.topo.devices_per_machine = 4;
  auto pp4 = evaluate_plan(*a, parallel_plan{.pp = 4, .micro_batches = 4}, o);
  REQUIRE_FALSE(pp4);
  CHECK(pp4.error().message == "6 layers do not split evenly into 4 pipeline stages");
  // and no candidate of the search: every pp 4 plan is left out, pp 3 and 2 stay
  auto ranked = rank_plans(*a, o);
  REQUIRE(ranked);
  CHECK(std::none_of(ranked->begin(), ranked->end(), [](const planned& p) { return p.plan.stages() == 4; }));
  CHECK(std::any_of(ranked->begin(), ranked->end(), [](const planned& p) { return p.plan.stages() == 2; }));

  // cohort's own cutter balances the stages' times: the head's stage starts later
  o.topo.devices = o.topo.devices_per_machine = 3;
  o.even_layers = false;
  auto balanced = evaluate_plan(*a, parallel_plan{.pp = 3, .micro_batches = 3}, o);
  REQUIRE(balanced);
  CHECK(balanced->cuts.back() > three->back());
  // a model whose scopes do not repeat has no layers to count: no even split
  auto mlp = analyzed(mlp_1024, 2);
  CHECK(mlp->layer_starts.empty());
  auto none = even_layer_cuts(*mlp, 2);
  REQUIRE_FALSE(none);
  CHECK(none.error().message.find("no repeated layers") != std::string::npos);
}
