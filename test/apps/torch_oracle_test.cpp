// The oracle test against PyTorch: cohort and torch (python3-torch, via
// test/oracle/torch_reference.py) take one training step of the MLP, of a one-block GPT and of
// a small DLRM (torch's embedding_bag on offsets, its dot interaction, BCE with logits)
// from identical weights and inputs; the loss, every gradient and every updated parameter
// must agree within 1e-4 relative (max |a - b| <= 1e-4 * max |b| per tensor, plus 1e-7
// absolute for gradients that are zero in exact arithmetic, like the key bias's).
// Updated parameters are compared where the gradient is above 1e-5 of the largest gradient
// of the model: below that, AdamW's first step g / (|g| + eps) is dominated by float noise.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "apps/models/dlrm.hpp"
#include "apps/models/gpt.hpp"
#include "apps/models/mlp.hpp"
#include "kernels/trainer.hpp"
#include "support/tensor_checks.hpp"
#include "support/tensor_files.hpp"

using namespace cohort;
using namespace cohort::test;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("cohort-oracle-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void run_torch(const std::string& kind, const fs::path& dir) {
  std::string script = std::string(COHORT_SOURCE_DIR) + "/test/oracle/torch_reference.py";
  std::string cmd =
      "/usr/bin/python3 " + script + " " + kind + " " + dir.string() + " 2>" + (dir / "stderr.txt").string();
  int rc = std::system(cmd.c_str());
  std::ifstream err(dir / "stderr.txt");
  std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  REQUIRE_MESSAGE(rc == 0,
                  "the PyTorch oracle failed (python3-torch is installed by scripts/install-deps.sh): " << text);
}

struct diff {
  double max_abs = 0, scale = 0;
};

double max_abs(const tensor& t) {
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(static_cast<double>(t.at(i))));
  return m;
}

// Over the elements where `mask` (if given) has magnitude at least `threshold`.
diff compare(const tensor& a, const tensor& b, const tensor* mask = nullptr, double threshold = 0,
             std::int64_t* skipped = nullptr) {
  diff d;
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    if (mask != nullptr && std::fabs(mask->at(i)) < threshold) {
      if (skipped != nullptr) ++*skipped;
      continue;
    }
    d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(a.at(i)) - b.at(i)));
    d.scale = std::max(d.scale, std::fabs(static_cast<double>(b.at(i))));
  }
  return d;
}

void check_against(const std::string& what, const tensor& ours, const tensor& theirs, const tensor* grad_mask = nullptr,
                   double threshold = 0) {
  CAPTURE(what);
  REQUIRE(ours.shape() == theirs.shape());
  std::int64_t skipped = 0;
  diff d = compare(ours, theirs, grad_mask, threshold, &skipped);
  CHECK_MESSAGE(d.max_abs <= 1e-4 * d.scale + 1e-7, what << ": max |cohort - torch| = " << d.max_abs
                                                         << " vs max |torch| = " << d.scale << " (" << skipped
                                                         << " elements with noise-level gradients left out)");
}

// Trains one step, writes everything torch needs, runs torch, compares.
void one_step_against_torch(const std::string& kind, graph& g, var loss, const optimizer_config& opt,
                            const std::map<std::string, tensor>& inputs, const std::string& config) {
  auto tr = kernels::serial_trainer::create(g, loss, {.optimizer = opt, .seed = 5, .threads = 1});
  REQUIRE_MESSAGE(tr.ok(), tr.error().message);
  std::map<std::string, tensor> to_torch = inputs;
  std::uint64_t salt = 100;
  for (auto& [name, t] : (*tr)->parameters()) {
    // perturb every parameter (zero positions, unit LayerNorm gains...) so none is special
    tensor noise = random_tensor(t.shape(), ++salt, 0.1f);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] += noise.data<float>()[i];
    to_torch[name] = t.clone();
  }
  fs::path dir = fresh_dir(kind);
  write_tensors(dir, to_torch);
  std::ofstream(dir / "config.txt") << config;
  for (auto& [name, t] : inputs) (*tr)->input(name).copy_from(t);
  auto l = (*tr)->step();
  REQUIRE(l.ok());
  run_torch(kind, dir);
  auto ref = read_tensors(dir / "out");
  CHECK(*l == doctest::Approx(ref.at("loss").at(0)).epsilon(1e-5));
  std::size_t compared = 0;
  double largest_grad = 0;
  for (auto& [name, t] : ref)
    if (name.rfind("grad.", 0) == 0) largest_grad = std::max(largest_grad, max_abs(t));
  for (auto [p, gid] : (*tr)->grads().param_grads) {
    const std::string& name = g.value(p).name;
    check_against("grad." + name, (*tr)->exec().value(gid), ref.at("grad." + name));
    check_against("next." + name, (*tr)->parameters().at(name), ref.at("next." + name), &ref.at("grad." + name),
                  1e-5 * largest_grad);
    ++compared;
  }
  CHECK(compared == (*tr)->parameters().size());
  fs::remove_all(dir);
}

}  // namespace

TEST_CASE("one MLP step (SGD, momentum, weight decay) equals PyTorch") {
  graph g;
  auto m = apps::build_mlp(g, {64, 32, 32, 10}, 16);
  one_step_against_torch("mlp", g, m.loss, sgd_config{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f},
                         {{"x", random_tensor({16, 64}, 1)}, {"y", random_ints({16}, 2, 10)}},
                         "dims=64,32,32,10 lr=0.1");
}

TEST_CASE("one GPT block (embedding, attention, GELU MLP, AdamW) equals PyTorch") {
  graph g;
  apps::gpt_config c{.layers = 1, .d = 64, .heads = 4, .seq = 32, .vocab = 256};
  auto m = apps::build_gpt(g, c, 4);
  one_step_against_torch("gpt", g, m.loss,
                         adamw_config{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .weight_decay = 0.1f},
                         {{"tokens", random_ints({4, 32}, 3, 256)}, {"targets", random_ints({4, 32}, 4, 256)}},
                         "layers=1 d=64 heads=4 seq=32 lr=1e-2");
}

namespace {

void one_dlrm_step(const optimizer_config& opt, const std::string& config) {
  graph g;
  apps::dlrm_config c;
  c.dense = 5;
  c.dim = 4;
  c.bottom = {8};
  c.top = {6};
  c.tables = {{"a", 9, 1, false}, {"b", 6, 3, true}, {"c", 4, 2, false}};
  auto m = apps::build_dlrm(g, c, 8);
  tensor b = random_ints({8, 3}, 7, 6), cc = random_ints({8, 2}, 8, 4), label = tensor::empty({8});
  for (int i : {1, 5, 8, 11, 21, 22, 23}) b.data<std::int32_t>()[i] = bag_padding;  // short bags, an empty one
  cc.data<std::int32_t>()[3] = bag_padding;
  for (int i = 0; i < 8; ++i) label.data<float>()[i] = static_cast<float>(i % 3 == 0);
  one_step_against_torch(
      "dlrm", g, m.loss, opt,
      {{"dense", random_tensor({8, 5}, 9)}, {"a", random_ints({8, 1}, 10, 9)}, {"b", b}, {"c", cc}, {"label", label}},
      config);
}

}  // namespace

TEST_CASE("one DLRM step (pooled bags with padding, dot interaction, BCE with logits, SGD) equals PyTorch") {
  one_dlrm_step(sgd_config{.lr = 0.1f, .momentum = 0.9f}, "tables=a:0,b:1,c:0 lr=0.1");
}

TEST_CASE("one DLRM step with Adagrad equals torch.optim.Adagrad") {
  one_dlrm_step(adagrad_config{.lr = 0.1f}, "tables=a:0,b:1,c:0 lr=0.1 opt=adagrad");
}
