// Progress where work is long: calibration and a resume's checkpoint verification show one
// line redrawn with their share, rate and ETA on a terminal (the test runs the app under
// `script`, which gives it a pseudo-terminal), and exactly one line per phase when stderr is a
// file, with what was done, how much, how long and the rate.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>

#include "apps/driver/training_loop.hpp"
#include "run_app.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

std::string temp_file(const std::string& name) { return cohort::test::temp_path("progress", name); }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The app on a pseudo-terminal: everything it wrote, carriage returns kept.
std::string on_terminal(const std::string& args) {
  const std::string out = temp_file("tty.out");
  auto r = run("script -qec \"" + std::string(MLP_BINARY) + " " + args + "\" " + out + " >/dev/null; cat " + out, "");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return cohort::test::read_text(out);
}

}  // namespace

TEST_CASE("calibration: one line when stderr is a file, a redrawn line with the ETA on a terminal") {
  const std::string args =
      "--data.name=digits --plan.only=true --cluster.calibrate=true --cluster.profile=" + temp_file("profile.json");
  auto r = run(MLP_BINARY, args);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(count(r.err, "calibration: GEMM, memory, cache, optimizer, link and runtime measured, 6 measurements in") == 1);
  CHECK(r.err.find('\r') == std::string::npos);
  const std::string tty = on_terminal(args);
  CHECK(std::regex_search(tty, std::regex("\rcalibration [1-6]/6 measurements  eta ")));
  CHECK(tty.find("calibration: GEMM") != std::string::npos);
}

TEST_CASE("a resume's verification: one line with bytes and rate, a redrawn line on a terminal") {
  const std::string dir = temp_file("ck");
  std::filesystem::remove_all(dir);
  const std::string job = "--data.name=digits --train.threads=1 --checkpoint.dir=" + dir + " --checkpoint.every=5";
  REQUIRE(run(MLP_BINARY, job + " --train.steps=10").exit_code == 0);
  auto r = run(MLP_BINARY, job + " --train.steps=12 --checkpoint.every=0");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(std::regex_search(r.err, std::regex("resume: verifying the newest checkpoint in [^\n]+: [^\n]+step-000010 "
                                            "verified, [0-9.]+ kB in [0-9.]+ s \\([0-9.]+ [kMG]B/s\\)\n")));
  CHECK(r.err.find('\r') == std::string::npos);
  const std::string tty = on_terminal(job + " --train.steps=12 --checkpoint.every=0");
  CHECK(std::regex_search(tty, std::regex("\rresume: verifying the newest checkpoint in [^\r\n]+ +[0-9]+% ")));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the training line shows a background checkpoint write while it is under way") {
  cohort::apps::training_job job;
  job.app = "mlp";
  job.steps = 10;
  cohort::apps::loop_state loop(job);
  CHECK(loop.writing_text().empty());  // nothing being written
  loop.writing->started_ns = std::chrono::steady_clock::now().time_since_epoch().count() - 1'000'000'000;
  loop.writing->total = 200'000'000;
  loop.writing->done = 50'000'000;  // a quarter in one second
  const std::string text = loop.writing_text();
  CHECK(text.find("checkpoint 25% ") != std::string::npos);
  CHECK(text.find(" MB/s eta ") != std::string::npos);
  loop.writing->done = 200'000'000;
  CHECK(loop.writing_text().empty());  // done
}
