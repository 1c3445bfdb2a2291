// README.md's "write your own model" snippets, compiled and run: the serial one (copied below
// and checked to be the README's text) must train; the distributed one (compiled from the
// README itself as readme-distributed) must print the same losses over 2 processes as its
// serial run.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "graph/dsl.hpp"
#include "graph/layers.hpp"
#include "graph/random.hpp"
#include "kernels/trainer.hpp"
#include "run_app.hpp"

using namespace cohort;

namespace {

// A learnable stand-in for the user's data: labels from a fixed linear teacher.
float last_loss = 0, first_loss = 0;
rng data_rng(3);
void next_batch(tensor& x, tensor& y) {
  for (std::int64_t i = 0; i < 32; ++i) {
    float best = -1e30f;
    for (std::int64_t j = 0; j < 64; ++j) x.data<float>()[i * 64 + j] = data_rng.normal();
    for (int c = 0; c < 10; ++c) {
      float s = 0;
      for (std::int64_t j = 0; j < 64; ++j)
        s += x.data<float>()[i * 64 + j] * static_cast<float>(((j * 7 + c * 13) % 5) - 2);
      if (s > best) {
        best = s;
        y.data<std::int32_t>()[i] = c;
      }
    }
  }
}

}  // namespace

TEST_CASE("the README example builds, trains and lowers its loss") {
  // the text of README.md, as written there:
  // clang-format off
  // --- begin README snippet ---
  graph g;
  var x = g.input("x", {32, 64});                       // a batch of 32 feature vectors
  var y = g.input("y", {32}, dtype::i32);               // their class labels
  var h = gelu(linear(x, 128, "fc1"));                  // creates fc1.weight [64,128], fc1.bias [128]
  var loss = softmax_cross_entropy(linear(h, 10, "fc2"), y);
  if (auto st = g.check(); !st) throw std::runtime_error(st.error().message);

  auto trainer = kernels::serial_trainer::create(g, loss, {.optimizer = adamw_config{.lr = 1e-3f}, .threads = 2});
  if (!trainer) throw std::runtime_error(trainer.error().message);
  auto& tr = **trainer;
  for (int step = 0; step < 100; ++step) {
    next_batch(tr.input("x"), tr.input("y"));          // your data, written into the input buffers
    result<float> l = tr.step();                        // forward, backward, AdamW update
  // --- end README snippet ---
    // clang-format on
    REQUIRE(l.ok());
    if (step == 0) first_loss = *l;
    last_loss = *l;
  }
  MESSAGE("loss " << first_loss << " -> " << last_loss);
  CHECK(last_loss < 0.6f * first_loss);
}

TEST_CASE("the serial snippet above is the README's text") {
  auto text = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string readme = text(std::string(COHORT_SOURCE_DIR) + "/README.md");
  const std::string self = text(std::string(COHORT_SOURCE_DIR) + "/test/apps/readme_example_test.cpp");
  const auto begin = self.find("// --- begin README snippet ---\n"), end = self.find("  // --- end README snippet ---");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::istringstream lines(self.substr(begin + 32, end - begin - 32));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    CAPTURE(line);
    CHECK(readme.find(line.substr(std::min<std::size_t>(2, line.size())) + "\n") !=
          std::string::npos);  // minus the indent
    ++checked;
  }
  CHECK(checked > 10);
}

TEST_CASE("the README's distributed example trains over 2 processes with its serial run's losses") {
  auto losses = [](const std::string& path) {
    std::vector<double> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
    return out;
  };
  const auto dir = std::filesystem::temp_directory_path();
  const std::string serial_path = (dir / ("readme-serial-" + std::to_string(::getpid()) + ".jsonl")).string();
  const std::string dist_path = (dir / ("readme-dist-" + std::to_string(::getpid()) + ".jsonl")).string();
  auto serial = cohort::test::run(README_DISTRIBUTED_BINARY, "--plan.mode=serial --metrics.file=" + serial_path);
  REQUIRE_MESSAGE(serial.exit_code == 0, serial.err);
  auto dist = cohort::test::run(README_DISTRIBUTED_BINARY, "--launch.nproc=2 --metrics.file=" + dist_path);
  REQUIRE_MESSAGE(dist.exit_code == 0, dist.err);
  CHECK(dist.summary["plan"]["processes"] == 2);
  CHECK(dist.summary["app"] == "sine");
  const auto a = losses(serial_path), b = losses(dist_path);
  REQUIRE(a.size() == 40);
  REQUIRE(b.size() == a.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(a[i]));
  MESSAGE("plan " << dist.summary["plan"]["dp"] << "x" << dist.summary["plan"]["tp"] << "x"
                  << dist.summary["plan"]["pp"] << " over 2 processes: max relative loss difference " << worst
                  << ", loss " << a.front() << " -> " << a.back());
  CHECK(worst <= 1e-5);
  CHECK(a.back() < 0.2 * a.front());
  auto bad = cohort::test::run(README_DISTRIBUTED_BINARY, "--model.width=3");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "sine: error: --model.width must be even\n");
}
