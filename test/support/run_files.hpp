// What the app-level tests read back from a run: temporary paths of their own (the test's pid
// in the name, so parallel ctest runs never share one), the losses of a metrics file (its event
// lines left out), its event lines, and the worst relative difference of two loss curves.
//
//   const std::string metrics = cohort::test::temp_path("tr", "run.jsonl");   // /tmp/cohort-tr-PID-run.jsonl
//   auto r = cohort::test::run(MLP_BINARY, "--train.steps=5 --metrics.file=" + metrics);
//   std::vector<double> l = cohort::test::metrics_losses(metrics);            // one per step
//   CHECK(cohort::test::worst_relative(l, l) == 0);
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace cohort::test {

/// /tmp/cohort-PREFIX-PID-NAME.
inline std::string temp_path(const std::string& prefix, const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("cohort-" + prefix + "-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

/// The same path, with whatever a previous run left there removed.
inline std::string fresh_dir(const std::string& prefix, const std::string& name) {
  const std::string d = temp_path(prefix, name);
  std::filesystem::remove_all(d);
  return d;
}

/// Every step's loss in a metrics file (--metrics.file), in order; event lines are left out.
inline std::vector<double> metrics_losses(const std::string& path) {
  std::vector<double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("event")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

/// Every step's loss as its last record says (index 0: step 1): steps trained again after a
/// fallback on a checkpoint are reported again, and the last report counts.
inline std::vector<double> metrics_last_losses(const std::string& path) {
  std::vector<double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("event")) continue;
    const auto step = j["step"].get<std::size_t>();
    if (out.size() < step) out.resize(step);
    out[step - 1] = j["loss"].get<double>();
  }
  return out;
}

/// The event lines of a metrics file ({"event": "recovery", ...}).
inline std::vector<nlohmann::json> metrics_events(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (auto j = nlohmann::json::parse(line); j.contains("event")) out.push_back(j);
  return out;
}

/// A file's whole text ("" when it is not there).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The non-empty lines of a file a running job is writing (its metrics file: the steps so far).
inline std::size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.empty() ? 0 : 1;
  return n;
}

/// The largest |a - b| / |b| over two curves of the same length.
inline double worst_relative(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
  return worst;
}

}  // namespace cohort::test
