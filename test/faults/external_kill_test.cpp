// Failures injected from outside, as a cluster does it: the test starts a real job of 4
// processes (--launch.nproc=4, --fault.recover=true), watches its metrics file, and at a
// seeded-random moment — after a seeded-random number of steps, then a seeded-random delay of
// up to 3 ms, so mid-step, mid-sum or between steps — SIGKILLs a seeded-random node process.
// The job must finish with every loss equal to the fault-free run's, one recovery recorded, and
// no process left behind. COHORT_FAULT_SEEDS=1,2,3 (the default) chooses the schedules.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "apps/run_app.hpp"
#include "support/run_files.hpp"

namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("ext", name); }

std::vector<unsigned> seeds() {
  std::vector<unsigned> out;
  std::stringstream list(std::getenv("COHORT_FAULT_SEEDS") ? std::getenv("COHORT_FAULT_SEEDS") : "1,2,3");
  for (std::string s; std::getline(list, s, ',');) out.push_back(static_cast<unsigned>(std::stoul(s)));
  return out;
}

const std::string job =
    "--data.name=synth --model.dims=256,512,512,10 --train.batch=128 --train.steps=150 "
    "--train.threads=1 --plan.dp=4 --launch.nproc=4 --fault.recover=true --plan.refit=false";

}  // namespace

TEST_SUITE("failure") {
  TEST_CASE("a node SIGKILLed from outside at a seeded-random moment: the job finishes with the fault-free losses") {
    const std::string clean_metrics = temp_path("clean.jsonl");
    auto clean = cohort::test::run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    const auto expected = cohort::test::metrics_losses(clean_metrics);
    for (unsigned seed : seeds()) {
      CAPTURE(seed);
      std::mt19937 rng(seed);
      const int victim = 1 + static_cast<int>(rng() % 3);
      const std::size_t after = 5 + rng() % 40;  // steps seen in the metrics file
      const auto delay = std::chrono::microseconds(rng() % 3000);
      const std::string tag = std::to_string(seed);
      const std::string metrics = temp_path(tag + ".jsonl"), out = temp_path(tag + ".out"),
                        err = temp_path(tag + ".err");
      for (const auto& f : {metrics, out, err}) fs::remove(f);
      std::fflush(nullptr);
      const pid_t launcher = ::fork();
      if (launcher == 0) {
        const std::string cmd =
            std::string(MLP_BINARY) + " " + job + " --metrics.file=" + metrics + " >" + out + " 2>" + err;
        ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
      }
      // the victim's pid from the coordinator's "job: 4 processes joined: ... N: pid P at ..." line
      pid_t pid = -1;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      const std::regex who(std::to_string(victim) + ": pid ([0-9]+) at");
      while (pid < 0 && std::chrono::steady_clock::now() < deadline) {
        std::smatch m;
        const std::string text = cohort::test::read_text(err);
        if (std::regex_search(text, m, who)) pid = static_cast<pid_t>(std::stol(m[1]));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      REQUIRE_MESSAGE(pid > 0, cohort::test::read_text(err));
      while (cohort::test::count_lines(metrics) < after && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::this_thread::sleep_for(delay);
      MESSAGE("seed " << seed << ": SIGKILL to process " << victim << " (pid " << pid << ") after " << after
                      << " steps + " << delay.count() << " us");
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(launcher, &status, 0);
      const std::string stderr_text = cohort::test::read_text(err);
      REQUIRE_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), stderr_text);
      CHECK(cohort::test::metrics_losses(metrics) == expected);
      const std::string stdout_text = cohort::test::read_text(out);
      const auto last_line = stdout_text.find_last_of('\n', stdout_text.size() >= 2 ? stdout_text.size() - 2 : 0);
      auto summary =
          nlohmann::json::parse(last_line == std::string::npos ? stdout_text : stdout_text.substr(last_line + 1));
      REQUIRE(summary["recoveries"].size() == 1);
      CHECK(summary["recoveries"][0]["lost"] == "process " + std::to_string(victim));
      CHECK(summary["final_loss"] == clean.summary["final_loss"]);
      // nothing left behind: every process of the job has ended
      const std::string roster =
          stderr_text.substr(0, stderr_text.find('\n', stderr_text.find("job: 4 processes joined")));
      const std::regex any_pid("pid ([0-9]+) at");
      for (std::sregex_iterator it(roster.begin(), roster.end(), any_pid), end; it != end; ++it)
        CHECK(::kill(static_cast<pid_t>(std::stol((*it)[1])), 0) != 0);
    }
  }
}
