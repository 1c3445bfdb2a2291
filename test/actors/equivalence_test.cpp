// Every plan trains like the serial program: for the MLP and the GPT, each of dp2, tp2,
// pp2 (GPipe and 1F1B, 4 micro-batches), dp2xtp2, dp2xpp2, tp2xpp2, dp2xtp2xpp2, dp2 with
// sharded parameters, tp3, pp3 and pp4 with uneven stages runs 30 steps whose losses equal
// the serial run's within 1e-5 relative.
//
// Why 1e-5: every plan computes the same sums in a different order (a tensor-parallel
// partial sum is added across ranks, a data-parallel mean is a mean of means, micro-batch
// gradients are accumulated), and each reordering changes a float32 result by a few ulps
// (~1e-7 relative). Thirty optimizer steps let those differences feed back; they stay
// around 1e-6. A wrong plan (a missing allreduce, a gradient counted twice, a stale
// parameter) is off by 1e-2 or more after a step or two.
#include <doctest/doctest.h>

#include <cmath>

#include "apps/models/mlp.hpp"
#include "apps/models/gpt.hpp"
#include "graph/random.hpp"
#include "support/tensor_checks.hpp"
#include "support/thread_runner.hpp"

using namespace cohort;
using namespace cohort::test;
using planner::parallel_plan;
using planner::schedule_kind;

namespace {

constexpr int steps = 30;
constexpr double tolerance = 1e-5;

struct named_plan {
  const char* name;
  parallel_plan plan;
  std::vector<std::size_t> cuts;  // explicit stage cuts (empty: balanced)
};

std::vector<named_plan> plans() {
  return {
      {"dp2", {.dp = 2}, {}},
      {"tp2", {.tp = 2}, {}},
      {"pp2 gpipe m4", {.pp = 2, .micro_batches = 4, .schedule = schedule_kind::gpipe}, {}},
      {"pp2 1f1b m4", {.pp = 2, .micro_batches = 4}, {}},
      {"dp2 tp2", {.dp = 2, .tp = 2}, {}},
      {"dp2 pp2 m4", {.dp = 2, .pp = 2, .micro_batches = 4}, {}},
      {"tp2 pp2 m4", {.tp = 2, .pp = 2, .micro_batches = 4}, {}},
      {"dp2 tp2 pp2 m2", {.dp = 2, .tp = 2, .pp = 2, .micro_batches = 2}, {}},
      {"dp2 sharded", {.dp = 2, .shard_params = true}, {}},
      {"tp3", {.tp = 3}, {}},
      {"pp3 m4", {.pp = 3, .micro_batches = 4}, {}},
  };
}

void check_same(const std::vector<float>& serial, const std::vector<float>& dist, const std::string& plan) {
  CAPTURE(plan);
  REQUIRE(serial.size() == dist.size());
  double worst = 0;
  for (std::size_t i = 0; i < serial.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(dist[i]) - serial[i]) / std::fabs(static_cast<double>(serial[i])));
  MESSAGE(plan << ": max relative loss difference over " << serial.size() << " steps " << worst << " (first "
               << serial.front() << ", last " << serial.back() << ")");
  CHECK(worst <= tolerance);
}

// MLP: 3 layers (fc1 column, fc2 row, fc3 replicated); labels from a fixed linear teacher.
batch_fn mlp_data(std::int64_t batch) {
  return [batch](std::int64_t step) {
    rng r(1000 + static_cast<std::uint64_t>(step));
    tensor x = tensor::empty({batch, 24});
    tensor y = tensor::empty({batch}, dtype::i32);
    for (std::int64_t i = 0; i < batch; ++i) {
      float best = -1e30f;
      for (std::int64_t j = 0; j < 24; ++j) x.data<float>()[i * 24 + j] = r.normal();
      for (int c = 0; c < 10; ++c) {
        float s = 0;
        for (std::int64_t j = 0; j < 24; ++j) s += x.data<float>()[i * 24 + j] * static_cast<float>((j * 7 + c * 3) % 5 - 2);
        if (s > best) { best = s; y.data<std::int32_t>()[i] = c; }
      }
    }
    return std::map<std::string, tensor>{{"x", x}, {"y", y}};
  };
}

// GPT: windows of a fixed byte string.
batch_fn gpt_data(std::int64_t batch, std::int64_t seq) {
  return [batch, seq](std::int64_t step) {
    static const std::string text =
        "cohort splits one training step over data, tensor and pipeline parallel ranks and must "
        "train exactly like the serial program; every plan is checked against it, step by step.";
    rng r(7 + static_cast<std::uint64_t>(step));
    tensor tokens = tensor::empty({batch, seq}, dtype::i32), targets = tensor::empty({batch, seq}, dtype::i32);
    for (std::int64_t b = 0; b < batch; ++b) {
      auto at = static_cast<std::int64_t>(r.below(text.size() - static_cast<std::size_t>(seq) - 1));
      for (std::int64_t t = 0; t < seq; ++t) {
        tokens.data<std::int32_t>()[b * seq + t] = static_cast<unsigned char>(text[static_cast<std::size_t>(at + t)]);
        targets.data<std::int32_t>()[b * seq + t] = static_cast<unsigned char>(text[static_cast<std::size_t>(at + t + 1)]);
      }
    }
    return std::map<std::string, tensor>{{"tokens", tokens}, {"targets", targets}};
  };
}

}  // namespace

TEST_CASE("MLP: every plan's losses equal the serial run's") {
  const std::int64_t batch = 24;
  actors::model_fn model = [](graph& g, std::int64_t b) { return apps::build_mlp(g, {24, 36, 30, 10}, b).loss; };
  optimizer_config opt = sgd_config{.lr = 0.1f, .momentum = 0.9f};
  auto serial = serial_losses(model, batch, steps, opt, 3, mlp_data(batch));
  for (const auto& np : plans()) {
    if (np.plan.dp * np.plan.micro_batches > batch) continue;
    check_same(serial, distributed_losses(model, np.plan, batch, steps, opt, 3, mlp_data(batch), np.cuts), np.name);
  }
  // pp4 with uneven stages: cut after fc1's matmul, after fc2's bias, after the last ReLU
  check_same(serial, distributed_losses(model, {.pp = 4, .micro_batches = 4}, batch, steps, opt, 3, mlp_data(batch), {1, 4, 6}),
             "pp4 uneven");
}

TEST_CASE("GPT: every plan's losses equal the serial run's") {
  const std::int64_t batch = 8, seq = 16;
  actors::model_fn model = [](graph& g, std::int64_t b) {
    return apps::build_gpt(g, {.layers = 2, .d = 24, .heads = 3, .seq = 16, .vocab = 256}, b).loss;
  };
  optimizer_config opt = adamw_config{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .weight_decay = 0.1f};
  auto serial = serial_losses(model, batch, steps, opt, 5, gpt_data(batch, seq));
  for (const auto& np : plans())
    check_same(serial, distributed_losses(model, np.plan, batch, steps, opt, 5, gpt_data(batch, seq), np.cuts), np.name);
  check_same(serial, distributed_losses(model, {.pp = 4, .micro_batches = 4}, batch, steps, opt, 5, gpt_data(batch, seq)),
             "pp4 uneven");
}
