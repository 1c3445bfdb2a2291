// The planner from the command line: --plan.only prints the ranked plans and the chosen one,
// --plan.file trains a saved plan, auto honours fixed degrees, a cluster file far bigger than
// this machine is planned (not trained), nothing fitting says what would, and a trained run
// reports predicted against measured step time.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "run_app.hpp"

using cohort::test::run;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name, const std::string& text) {
  auto p = fs::temp_directory_path() / ("cohort-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p) << text;
  return p;
}

const std::string small_gpt = "--model.layers=2 --model.d=64 --model.heads=2 --model.seq=32 --train.batch=8 ";

}  // namespace

TEST_CASE("--plan.only prints the ranked table and the chosen plan as JSON, and trains nothing") {
  auto r = run(MLP_BINARY, "--data.name=synth --plan.only=true --plan.ranks=4");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out.find("planning for 4 ranks on this machine") != std::string::npos);
  CHECK(r.out.find("step (ms)  memory (GB)  bubble   comm") != std::string::npos);
  const auto& plan = r.summary["plan"];
  CHECK(plan["mode"] == "auto");
  CHECK(plan["ranks"] == 4);
  CHECK(plan["dp"].get<int>() * plan["tp"].get<int>() * plan["pp"].get<int>() == 4);
  CHECK(plan["predicted"]["step_s"].get<double>() > 0);
  CHECK(!r.summary.contains("final_loss"));
}

TEST_CASE("auto keeps the degrees the user fixed and chooses the rest") {
  auto r = run(GPT_BINARY, small_gpt + "--plan.mode=auto --plan.pp=2 --plan.only=true --plan.ranks=4");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.summary["plan"]["pp"] == 2);
  CHECK(r.summary["plan"]["cuts"].size() == 1);
}

TEST_CASE("a manual plan runs the planner's stage cuts: the ones its prediction was made for") {
  // one profile for both runs (none yet: the defaults), so both predict with the same constants
  const auto profile = fs::temp_directory_path() / ("cohort-" + std::to_string(::getpid()) + "-cuts-profile.json");
  const std::string plan =
      small_gpt + "--train.steps=3 --plan.pp=2 --plan.micro-batches=2 --cluster.profile=" + profile.string() + " ";
  auto predicted = run(GPT_BINARY, plan + "--plan.only=true");
  REQUIRE_MESSAGE(predicted.exit_code == 0, predicted.err);
  auto trained = run(GPT_BINARY, plan + "--plan.refit=false");
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.err);
  const auto& cuts = predicted.summary["plan"]["cuts"];
  REQUIRE(cuts.size() == 1);                       // pp2: one cut, chosen by the planner's dynamic program
  CHECK(trained.summary["plan"]["cuts"] == cuts);  // the cuts the runtime compiled and ran
  CHECK(trained.summary["plan"]["predicted"]["stages"].size() == 2);
  MESSAGE("pp2 of the small GPT cut at forward node " << cuts[0]);
}

TEST_CASE("a saved plan trains as saved, and a broken one is refused naming the field") {
  auto only = run(GPT_BINARY,
                  small_gpt + "--plan.mode=auto --plan.pp=2 --plan.micro-batches=2 --plan.only=true --plan.ranks=2");
  REQUIRE_MESSAGE(only.exit_code == 0, only.err);
  auto file = temp_file("plan.json", only.summary["plan"].dump());
  auto trained = run(GPT_BINARY, small_gpt + "--train.steps=3 --plan.file=" + file.string());
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.err);
  CHECK(trained.summary["plan"]["pp"] == 2);
  CHECK(trained.summary["plan"]["micro_batches"] == 2);
  CHECK(trained.summary["plan"]["cuts"] == only.summary["plan"]["cuts"]);
  CHECK(trained.summary["plan"]["mode"] == "file " + file.string());
  CHECK(trained.summary["prediction"]["measured_step_s"].get<double>() > 0);

  auto bad = temp_file("bad-plan.json", R"({"dp": 2, "tp": "two"})");
  auto r = run(GPT_BINARY, small_gpt + "--plan.file=" + bad.string());
  CHECK(r.exit_code == 2);
  CHECK(r.err == "gpt: error: " + bad.string() + ": tp: expected a positive integer\n");
  auto unknown = temp_file("unknown-plan.json", R"({"dp": 2, "zero": 3})");
  r = run(GPT_BINARY, small_gpt + "--plan.file=" + unknown.string());
  CHECK(r.err == "gpt: error: " + unknown.string() + ": unknown key 'zero'\n");
  auto cuts = temp_file("cuts-plan.json", R"({"pp": 3, "cuts": [4]})");
  r = run(GPT_BINARY, small_gpt + "--plan.file=" + cuts.string());
  CHECK(r.err == "gpt: error: " + cuts.string() + ": cuts: 1 cuts for pp=3 (needs pp - 1)\n");
  for (const auto& f : {file, bad, unknown, cuts}) fs::remove(f);
}

TEST_CASE("interleaved 1F1B from the command line: trained, saved, predicted per rank, bad values refused") {
  const std::string plan = small_gpt + "--train.steps=3 --plan.pp=2 --plan.virtual-stages=2 --plan.micro-batches=4 ";
  auto trained = run(GPT_BINARY, plan + "--plan.refit=false");
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.err);
  const auto& p = trained.summary["plan"];
  CHECK(p["virtual_stages"] == 2);
  CHECK(p["cuts"].size() == 3);                 // four stages: 0 and 2 on rank 0, 1 and 3 on rank 1
  CHECK(p["predicted"]["stages"].size() == 2);  // predicted per pipeline rank
  CHECK((trained.out + trained.err).find("plan: dp1 tp1 pp2 v2 m4 1f1b") != std::string::npos);
  CHECK(std::isfinite(trained.summary["final_loss"].get<double>()));
  // its saved form trains as saved
  auto file = temp_file("v2-plan.json", p.dump());
  auto again = run(GPT_BINARY, small_gpt + "--train.steps=3 --plan.file=" + file.string());
  REQUIRE_MESSAGE(again.exit_code == 0, again.err);
  CHECK(again.summary["final_loss"] == trained.summary["final_loss"]);
  auto cuts = temp_file("v2-cuts.json", R"({"pp": 2, "virtual_stages": 2, "micro_batches": 4, "cuts": [4]})");
  auto r = run(GPT_BINARY, small_gpt + "--plan.file=" + cuts.string());
  CHECK(r.exit_code == 2);
  CHECK(r.err == "gpt: error: " + cuts.string() + ": cuts: 1 cuts for pp=2 x virtual_stages=2 (needs pp x v - 1)\n");
  r = run(GPT_BINARY, small_gpt + "--plan.pp=2 --plan.virtual-stages=2 --plan.micro-batches=3");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("virtual stages need micro-batches in whole groups of pp (2), got 3") != std::string::npos);
  r = run(GPT_BINARY, small_gpt + "--plan.virtual-stages=2");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("need pp >= 2") != std::string::npos);
  // the auto planner cuts every plan itself: given cuts there would be ignored
  r = run(GPT_BINARY, small_gpt + "--plan.mode=auto --plan.cuts=4");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--plan.cuts: the auto planner cuts every plan it considers itself") != std::string::npos);
  r = run(GPT_BINARY, small_gpt + "--plan.virtual-stages=-1");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--plan.virtual-stages must be 0") != std::string::npos);
  // auto with the constraint: the planner's choice among interleaved plans
  auto chosen = run(GPT_BINARY, small_gpt + "--plan.mode=auto --plan.virtual-stages=2 --plan.only=true --plan.ranks=2");
  REQUIRE_MESSAGE(chosen.exit_code == 0, chosen.err);
  CHECK(chosen.summary["plan"]["virtual_stages"] == 2);
  CHECK(chosen.summary["plan"]["pp"] == 2);
  for (const auto& f : {file, cuts}) fs::remove(f);
}

TEST_CASE("GPT-3 175B on a 64-GPU cluster file is planned in seconds, not trained") {
  auto r =
      run(GPT_BINARY,
          std::string("--model.layers=96 --model.d=12288 --model.heads=96 --model.seq=2048 ") +
              "--model.vocab=50257 --train.batch=64 --plan.half-precision=true --plan.recompute=true --plan.only=true "
              "--cluster.file=" COHORT_SOURCE_DIR "/configs/cluster_gpu_64.json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto& plan = r.summary["plan"];
  CHECK(plan["ranks"] == 64);
  CHECK(plan["tp"].get<int>() <= 8);  // tensor parallelism stays inside a machine
  CHECK(plan["devices"].size() == 64);
  CHECK(plan["predicted"]["fits"] == true);
  CHECK(plan["predicted"]["peak_memory_bytes"].get<double>() <= 0.9 * 80e9);
  CHECK(plan["recompute"] == true);  // 175B on 64 GPUs fits only when activations are recomputed
  // training on a cluster file is the multi-process runtime's job
  auto t = run(GPT_BINARY, small_gpt + "--cluster.file=" COHORT_SOURCE_DIR "/configs/cluster_gpu_64.json");
  CHECK(t.exit_code == 2);
  CHECK(t.err.find("--plan.only=true plans for them") != std::string::npos);
}

TEST_CASE("a cluster is priced with its device profile, and the planning options for published runs are checked") {
  const std::string gpt3 = std::string("--model.layers=96 --model.d=12288 --model.heads=96 --model.seq=2048 ") +
                           "--model.vocab=51200 --train.batch=1536 --plan.half-precision=true --plan.only=true "
                           "--cluster.file=" COHORT_SOURCE_DIR "/configs/published/selene_1536.json ";
  auto r = run(GPT_BINARY, gpt3 + "--plan.always-recompute=true --plan.max-micro-batches=256");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto& plan = r.summary["plan"];
  CHECK(plan["device_profile"].get<std::string>().find("configs/devices/a100-sxm4-80gb.json") != std::string::npos);
  CHECK(plan["recompute"] == true);
  CHECK(r.out.find("device efficiencies: A100-SXM4-80GB") != std::string::npos);
  // model FLOPs utilisation is bounded by the profile's efficiencies, whatever this machine's profile holds
  CHECK(plan["predicted"]["mfu"].get<double>() < 0.869);
  auto fused = run(GPT_BINARY, gpt3 + "--model.attention=fused --plan.assume-overlap=tp,dp");
  REQUIRE_MESSAGE(fused.exit_code == 0, fused.err);
  CHECK(fused.summary["plan"]["predicted"]["step_s"].get<double>() < plan["predicted"]["step_s"].get<double>());
  auto bad = run(GPT_BINARY, gpt3 + "--plan.assume-overlap=pp");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--plan.assume-overlap: expected none, tp, dp or tp,dp, got 'pp'") != std::string::npos);
  for (const char* other_runtime :
       {"--plan.assume-overlap=tp", "--plan.assume-sequence-parallel=true", "--plan.assume-f32-gradients=true",
        "--plan.assume-f32-loss=true", "--plan.assume-even-layers=true"}) {
    auto here = run(GPT_BINARY, small_gpt + other_runtime);
    CHECK_MESSAGE(here.exit_code == 2, other_runtime);
    CHECK_MESSAGE(here.err.find("plan for a --cluster.file") != std::string::npos, other_runtime);
  }
  // Megatron's split: the blocks evenly over the stages (cohort's own cutter gives the heavy
  // head's stage fewer), any chunk count that divides a rank's blocks; a pp that does not divide
  // them is no plan
  const std::string megatron_split =
      "--model.d=64 --model.heads=2 --model.seq=32 --model.vocab=4096 --train.batch=8 "
      "--plan.only=true --plan.half-precision=true --plan.mode=auto --plan.pp=2 "
      "--cluster.file=" COHORT_SOURCE_DIR "/configs/cluster_paddle_2x8.json ";
  auto even =
      run(GPT_BINARY, megatron_split + "--model.layers=6 --plan.virtual-stages=1 --plan.assume-even-layers=true");
  REQUIRE_MESSAGE(even.exit_code == 0, even.err);
  auto balanced = run(GPT_BINARY, megatron_split + "--model.layers=6 --plan.virtual-stages=1");
  REQUIRE_MESSAGE(balanced.exit_code == 0, balanced.err);
  CHECK(even.summary["plan"]["cuts"].size() == 1);
  CHECK(even.summary["plan"]["cuts"] != balanced.summary["plan"]["cuts"]);
  const auto list = temp_file("even-layers-list.jsonl", "");
  auto listing =
      run(GPT_BINARY, megatron_split + "--model.layers=6 --plan.assume-even-layers=true --plan.list=" + list.string());
  REQUIRE_MESSAGE(listing.exit_code == 0, listing.err);
  bool three_chunks = false;
  std::ifstream listed(list);
  for (std::string line; std::getline(listed, line);)
    three_chunks = three_chunks || nlohmann::json::parse(line)["virtual_stages"] == 3;
  CHECK(three_chunks);
  auto uneven = run(GPT_BINARY, megatron_split + "--model.layers=3 --plan.assume-even-layers=true");
  CHECK(uneven.exit_code == 2);
  CHECK_MESSAGE(uneven.err.find("pp x virtual stages must divide the model's 3 layers") != std::string::npos,
                uneven.err);
  // a runtime whose tp ranks split the layer norms, residuals and the loss by sequence (less to
  // do and to keep: the planner's tp 8 plan gains)
  auto sequence = run(GPT_BINARY, gpt3 +
                                      "--model.attention=fused --plan.assume-overlap=tp,dp "
                                      "--plan.assume-sequence-parallel=true");
  REQUIRE_MESSAGE(sequence.exit_code == 0, sequence.err);
  const auto& faster = sequence.summary["plan"]["predicted"];
  CHECK(faster["step_s"].get<double>() < fused.summary["plan"]["predicted"]["step_s"].get<double>());
  auto attention = run(GPT_BINARY, small_gpt + "--model.attention=flash");
  CHECK(attention.exit_code == 2);
  CHECK(attention.err.find("--model.attention must be unfused or fused, got 'flash'") != std::string::npos);
  auto head = run(GPT_BINARY, small_gpt + "--model.head=vocab");
  CHECK(head.exit_code == 2);
  CHECK(head.err.find("--model.head must be replicated or column, got 'vocab'") != std::string::npos);
}

TEST_CASE("when nothing fits, the error says what would") {
  auto tiny = temp_file("tiny.json", R"({"cohort_cluster": 1, "machines": [{"hostname": "h", "devices": [
      {"kind": "gpu", "model": "tiny", "count": 2, "tflops": {"f32": 10}, "memory_gb": 0.001,
       "memory_bandwidth_gb_per_s": 100}]}]})");
  auto r = run(MLP_BINARY,
               "--data.name=synth --model.dims=784,2048,2048,10 --plan.only=true --cluster.file=" + tiny.string());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no plan fits in memory") != std::string::npos);
  CHECK(r.err.find("would fit: ") != std::string::npos);
  CHECK(r.err.find("devices with") != std::string::npos);
  fs::remove(tiny);
}

TEST_CASE("a job of several processes is planned with --plan.processes and the link between them") {
  auto profile = fs::temp_directory_path() / ("cohort-" + std::to_string(::getpid()) + "-plan-procs.json");
  std::ofstream(profile) << R"({"cohort_profile": 1, "cores": 2, "flops_f32_per_core": 5e10,
    "memory_bandwidth_bytes_per_s": 1e10, "refits": 0, "link": {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-5},
    "efficiency": {"gemm": 0.6, "memory": 0.5, "link": 0.8, "per_op_seconds": 2e-6},
    "process_links": {"tcp": {"bandwidth_bytes_per_s": 1e8, "latency_s": 1e-4}}})";
  const std::string base = "--data.name=synth --train.threads=1 --plan.only=true --cluster.profile=" + profile.string();
  auto two = run(MLP_BINARY, base + " --plan.processes=2");
  REQUIRE_MESSAGE(two.exit_code == 0, two.err);
  CHECK(two.out.find("planning for 2 ranks on this machine in 2 processes (tcp)") != std::string::npos);
  CHECK(two.out.find("between processes tcp 0.10 GB/s + 100.0 us") != std::string::npos);
  CHECK(two.summary["plan"]["ranks"] == 2);
  // the same ranks in one process: every group on the in-process link, so faster
  auto one = run(MLP_BINARY, base + " --plan.ranks=2 --plan.mode=manual --plan.dp=2");
  auto split = run(MLP_BINARY, base + " --plan.processes=2 --plan.mode=manual --plan.dp=2");
  REQUIRE_MESSAGE((one.exit_code == 0 && split.exit_code == 0), one.err << split.err);
  CHECK(split.summary["plan"]["predicted"]["step_s"].get<double>() >
        one.summary["plan"]["predicted"]["step_s"].get<double>());
  auto training = run(MLP_BINARY, "--data.name=synth --train.steps=2 --plan.processes=2");
  CHECK(training.exit_code == 2);
  CHECK(training.err.find("--plan.processes plans a job of several processes with --plan.only") != std::string::npos);
  auto zero = run(MLP_BINARY, base + " --plan.processes=0");
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("--plan.processes must be at least 1") != std::string::npos);
  fs::remove(profile);
}

TEST_CASE("a job of two processes measures the link between them once and keeps it in the profile") {
  auto profile = fs::temp_directory_path() / ("cohort-" + std::to_string(::getpid()) + "-links.json");
  std::ofstream(profile) << R"({"cohort_profile": 1, "cores": 2, "flops_f32_per_core": 5e10,
    "memory_bandwidth_bytes_per_s": 1e10, "refits": 0, "link": {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-5},
    "efficiency": {"gemm": 0.6, "memory": 0.5, "link": 0.8, "per_op_seconds": 2e-6}})";
  const std::string job =
      "--data.name=synth --model.dims=64,32,10 --train.steps=3 --train.threads=1 "
      "--launch.nproc=2 --cluster.profile=" +
      profile.string();
  auto first = run(MLP_BINARY, job);
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  CHECK(first.err.find("planner: the tcp link between processes measured: ") != std::string::npos);
  std::ifstream in(profile);
  auto saved = nlohmann::json::parse(in);
  CHECK(saved["process_links"]["tcp"]["bandwidth_bytes_per_s"].get<double>() > 0);
  CHECK(saved["process_links"]["tcp"]["latency_s"].get<double>() > 0);  // never none, even under load
  // the link's slowdown for a job of 2, refit from the run
  CHECK(saved["process_links"]["tcp"]["by_processes"]["2"]["refits"] == 1);
  CHECK(saved["process_links"]["tcp"]["by_processes"]["2"]["slowdown"].get<double>() > 0);
  CHECK(saved["refits"].get<int>() <= 1);  // the compute, unless its fit was refused (above 1 under load)
  auto second = run(MLP_BINARY, job);
  REQUIRE_MESSAGE(second.exit_code == 0, second.err);
  CHECK(second.err.find("link between processes measured") == std::string::npos);  // kept, not measured again
  fs::remove(profile);
}

TEST_CASE("calibration writes a profile, and a run refits it and reports predicted against measured") {
  auto profile = fs::temp_directory_path() / ("cohort-" + std::to_string(::getpid()) + "-profile.json");
  fs::remove(profile);
  auto r =
      run(MLP_BINARY, "--data.name=synth --train.steps=6 --train.warmup=2 --cluster.calibrate=true --cluster.profile=" +
                          profile.string());
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  REQUIRE(fs::exists(profile));
  const auto& p = r.summary["prediction"];
  CHECK(p["predicted_step_s"].get<double>() > 0);
  CHECK(p["measured_step_s"].get<double>() > 0);
  CHECK(p["refit"]["compute_factor"].get<double>() > 0);
  std::ifstream in(profile);
  auto saved = nlohmann::json::parse(in);
  if (p["refit"].contains("refused")) {
    // a calibration disturbed by a parallel test measured a peak the run then beat: an
    // efficiency above 1 is refused, not saved (the profile keeps no refit) — said, and checked
    MESSAGE("refit refused under load: " << p["refit"]["refused"]);
    CHECK(p["refit"]["refused"].get<std::string>().find("above 1") != std::string::npos);
    CHECK(saved["refits"] == 0);
    fs::remove(profile);
    return;
  }
  CHECK(saved["refits"] == 1);
  CHECK(saved["flops_f32_per_core"].get<double>() > 1e8);
  CHECK(saved["process_links"]["tcp"]["bandwidth_bytes_per_s"].get<double>() > 0);  // between processes
  CHECK(saved["efficiency"]["gemm"] == p["refit"]["efficiency"]["gemm"]);
  // the runtime's overhead was measured (a line says what was fitted) and saved, refit
  CHECK(r.err.find("calibration: runtime overhead") != std::string::npos);
  for (const char* term : {"per_task_seconds", "per_step_seconds", "per_rank_seconds"}) {
    CHECK(saved["efficiency"][term].get<double>() >= 0);
    CHECK(saved["efficiency"][term] == p["refit"]["efficiency"][term]);
  }
  // a second run: the profile keeps the mean of the two runs' fits (geometric for efficiencies)
  auto again =
      run(MLP_BINARY, "--data.name=synth --train.steps=6 --train.warmup=2 --cluster.profile=" + profile.string());
  REQUIRE_MESSAGE(again.exit_code == 0, again.err);
  const auto& q = again.summary["prediction"]["refit"];
  CHECK(q["weight"] == 0.5);
  std::ifstream in2(profile);
  auto resaved = nlohmann::json::parse(in2);
  CHECK(resaved["refits"] == 2);
  CHECK(resaved["efficiency"]["gemm"].get<double>() ==
        doctest::Approx(std::sqrt(saved["efficiency"]["gemm"].get<double>() * q["efficiency"]["gemm"].get<double>())));
  CHECK(resaved["efficiency"]["per_step_seconds"].get<double>() ==
        doctest::Approx((saved["efficiency"]["per_step_seconds"].get<double>() +
                         q["efficiency"]["per_step_seconds"].get<double>()) /
                        2));
  CHECK(resaved["efficiency"] == q["saved_efficiency"]);
  // a profile written before the overhead terms: its per-rank step cost is x per step and x per extra rank
  std::ofstream(profile) << R"({"cohort_profile": 1, "cores": 2, "flops_f32_per_core": 5e10,
    "memory_bandwidth_bytes_per_s": 1e10, "refits": 3, "link": {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-5},
    "efficiency": {"gemm": 0.6, "memory": 0.5, "link": 0.8, "per_op_seconds": 2e-6, "per_rank_step_seconds": 1e-4}})";
  auto legacy = run(MLP_BINARY, "--data.name=synth --plan.only=true --cluster.profile=" + profile.string());
  REQUIRE_MESSAGE(legacy.exit_code == 0, legacy.err);
  CHECK(legacy.out.find("runtime 0 us per task, 100 us per step, 100 us per extra rank") != std::string::npos);
  // a malformed profile is an error naming the file and the field
  std::ofstream(profile) << R"({"cohort_profile": 1, "cores": "many"})";
  auto bad = run(MLP_BINARY, "--data.name=synth --plan.only=true --cluster.profile=" + profile.string());
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "mlp: error: " + profile.string() + ": profile.cores: expected a non-negative number\n");
  fs::remove(profile);
}
