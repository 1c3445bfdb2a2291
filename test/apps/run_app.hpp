// Runs an app binary as a user would: its stdout, its stderr, its exit code, and the JSON
// summary on its last stdout line.
//
//   auto r = cohort::test::run(MLP_BINARY, "--train.steps=5");
//   CHECK(r.exit_code == 0);  CHECK(r.summary["app"] == "mlp");
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace cohort::test {

struct run_result {
  int exit_code = -1;
  std::string out, err;
  nlohmann::json summary;
};

inline run_result run(const std::string& binary, const std::string& args) {
  static std::atomic<int> calls{0};  // two runs at once (one on another thread) keep their own stderr
  auto err_path = std::filesystem::temp_directory_path() /
                  ("cohort-cli-" + std::to_string(::getpid()) + "-" + std::to_string(calls++) + ".err");
  std::string cmd = binary + " " + args + " 2>" + err_path.string();
  run_result r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p) != nullptr) r.out += buf.data();
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  std::filesystem::remove(err_path);
  auto last = r.out.find_last_of('\n', r.out.size() >= 2 ? r.out.size() - 2 : 0);
  std::string last_line = r.out.substr(last == std::string::npos ? 0 : last + 1);
  r.summary = nlohmann::json::parse(last_line, nullptr, false);
  return r;
}

}  // namespace cohort::test
