// Using a trained GPT as a user would: train, export (or checkpoint), then
// `gpt --init.from=... --generate.prompt=...` prints a continuation. Greedy decoding (temperature
// 0) picks, at every position, PyTorch's most likely next byte for the same weights and the same
// preceding bytes (test/oracle/torch_reference.py greedy, a window longer than the context
// included); sampling is seeded; a checkpoint directory serves as well as an export.
#include <doctest/doctest.h>

#include <filesystem>

#include "run_app.hpp"
#include "support/run_files.hpp"

using cohort::test::run;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("gen", name); }

const std::string model = "--model.layers=2 --model.d=64 --model.heads=4 --model.seq=32 --train.threads=1";

}  // namespace

TEST_CASE("greedy generation from a trained gpt picks torch's most likely byte at every position") {
  const std::string exported = temp_path("gpt.safetensors"), dir = temp_path("ck");
  fs::remove_all(dir);
  auto trained = run(GPT_BINARY, model + " --train.steps=60 --train.lr=0.003 --checkpoint.export=" + exported +
                                     " --checkpoint.dir=" + dir + " --checkpoint.every=60");
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.err);
  const std::string prompt = "This License ";
  auto greedy = run(GPT_BINARY, model + " --init.from=" + exported + " --generate.prompt='" + prompt +
                                    "' --generate.tokens=48 --generate.temperature=0");
  REQUIRE_MESSAGE(greedy.exit_code == 0, greedy.err);
  CHECK(greedy.summary["steps"] == 0);
  const auto generated = greedy.summary["generated_tokens"].get<std::vector<int>>();
  REQUIRE(generated.size() == 48);
  CHECK(greedy.out.rfind(prompt, 0) == 0);  // the continuation on stdout before the summary
  std::vector<int> all(prompt.begin(), prompt.end());
  all.insert(all.end(), generated.begin(), generated.end());
  auto oracle =
      run("/usr/bin/python3", std::string(COHORT_SOURCE_DIR) + "/test/oracle/torch_reference.py greedy " + exported +
                                  " 4 '" + nlohmann::json(all).dump() + "' " + std::to_string(prompt.size()));
  REQUIRE_MESSAGE(oracle.exit_code == 0, oracle.err);
  MESSAGE("torch's check of cohort's greedy continuation: " << oracle.summary.dump());
  CHECK(oracle.summary["checked"] == 48);
  CHECK(oracle.summary["disagree"] == 0);
  // the checkpoint of the same trained state continues the same way
  auto from_checkpoint = run(GPT_BINARY, model + " --init.from=" + dir + "/step-000060 --generate.prompt='" + prompt +
                                             "' --generate.tokens=48 --generate.temperature=0");
  REQUIRE_MESSAGE(from_checkpoint.exit_code == 0, from_checkpoint.err);
  CHECK(from_checkpoint.summary["generated_tokens"] == greedy.summary["generated_tokens"]);
  // sampling: seeded, and top-k 1 is greedy
  const std::string sample = model + " --init.from=" + exported + " --generate.prompt='" + prompt +
                             "' --generate.tokens=48 --generate.temperature=1.0 --generate.top-k=20";
  auto a = run(GPT_BINARY, sample + " --train.seed=1");
  auto b = run(GPT_BINARY, sample + " --train.seed=1");
  auto c = run(GPT_BINARY, sample + " --train.seed=2");
  REQUIRE(a.exit_code == 0);
  CHECK(a.summary["generated_tokens"] == b.summary["generated_tokens"]);
  CHECK(a.summary["generated_tokens"] != c.summary["generated_tokens"]);
  auto k1 = run(GPT_BINARY, model + " --init.from=" + exported + " --generate.prompt='" + prompt +
                                "' --generate.tokens=48 --generate.top-k=1");
  CHECK(k1.summary["generated_tokens"] == greedy.summary["generated_tokens"]);
}

TEST_CASE("generation without a model or with bad sampling options exits 2 naming the option") {
  auto none = run(GPT_BINARY, model + " --generate.prompt=hi");
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("--init.from") != std::string::npos);
  const std::string exported = temp_path("small.safetensors");
  auto trained = run(GPT_BINARY, model + " --train.steps=1 --checkpoint.export=" + exported);
  REQUIRE(trained.exit_code == 0);
  auto temp = run(GPT_BINARY, model + " --init.from=" + exported + " --generate.prompt=hi --generate.temperature=-1");
  CHECK(temp.exit_code == 2);
  CHECK(temp.err.find("--generate.temperature must be 0 (greedy) or positive") != std::string::npos);
  auto wider = run(GPT_BINARY, "--model.layers=2 --model.d=32 --model.heads=4 --model.seq=32 --init.from=" + exported +
                                   " --generate.prompt=hi");
  CHECK(wider.exit_code == 2);
  CHECK(wider.err.find("'block0.attn.k.bias' is [64] in " + exported + ", the model's is [32]") != std::string::npos);
}
