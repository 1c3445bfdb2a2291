// What a run tells its user: a progress line on stderr (redrawn in place on a terminal, one
// line every ~5 % otherwise), one JSON object per step in the metrics file, and the JSON
// summary that is the last line on stdout.
//
//   std::int64_t steps = 100;
//   std::string path = "metrics.jsonl";                  // --metrics.file; "" writes nothing
//   progress_line progress("mlp", steps);
//   metrics_file metrics;
//   if (auto st = metrics.open(path); !st) return st;
//   for (std::int64_t step = 1; step <= steps; ++step) {
//     float loss = 1.f / static_cast<float>(step);
//     progress.update(step, loss, /*rate=*/2500.0, "samples/s");
//     metrics.write({{"step", step}, {"loss", loss}});
//   }
//   progress.finish();
//   print_summary({{"app", "mlp"}, {"final_loss", 0.01}});   // the last line on stdout
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "graph/error.hpp"
#include "graph/progress.hpp"

namespace cohort::apps {

using json = nlohmann::json;

class progress_line {
 public:
  progress_line(std::string label, std::int64_t total_steps);
  /// After step `step` (1-based); `rate` in the unit named by `rate_unit`; `more` is appended
  /// on a terminal (e.g. a checkpoint being written).
  void update(std::int64_t step, float loss, double rate, const char* rate_unit, const std::string& more = "");
  void finish();

 private:
  std::string label_;
  std::int64_t total_;
  bool tty_;
  std::int64_t every_;
  std::chrono::steady_clock::time_point start_;
};

/// A phase of long work (calibration, verifying a checkpoint): on a terminal one line redrawn
/// with its share, rate and ETA; elsewhere silent until finish(), which prints one line with
/// what was done, how long it took and the rate.
//
//   phase_progress p("resume ck/step-000120", "B");
//   p.update(512 << 20, 1 << 30);                // on a terminal: "resume ... 50% 512 MB of 1.07 GB 1.2 GB/s eta 0.4s"
//   p.finish("4 files verified");                // "resume ck/step-000120: 4 files verified, 1.07 GB in 0.9 s (1.2 GB/s)"
class phase_progress {
 public:
  /// `unit`: "B" (shown as kB/MB/GB) or a word ("measurements").
  phase_progress(std::string label, std::string unit, bool quiet = false);
  void update(std::int64_t done, std::int64_t total);
  /// The phase's one line (a terminal's redrawn line is replaced by it).
  void finish(const std::string& what);
  progress_fn callback() {
    return [this](std::int64_t done, std::int64_t total) { update(done, total); };
  }

 private:
  std::string amount(double v) const;
  std::string label_, unit_;
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point start_, drawn_{};
  std::int64_t done_ = 0, total_ = 0;
};

/// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half
/// of it. Errors (io_error) start with `option` ("--report.file: cannot write ...").
status write_text_atomically(const std::string& path, const std::string& text, const std::string& option);

class metrics_file {
 public:
  metrics_file() = default;
  ~metrics_file();
  metrics_file(const metrics_file&) = delete;
  metrics_file& operator=(const metrics_file&) = delete;
  /// Opens (truncates, or with `append` continues) `path`; an empty path disables writing.
  status open(const std::string& path, bool append = false);
  void write(const json& record);

 private:
  std::FILE* file_ = nullptr;
};

/// Prints `summary` as one line of JSON on stdout.
void print_summary(const json& summary);

/// 2 for errors in what the user gave (options, files, a plan the model cannot take),
/// 1 for failures while running.
int exit_code_for(const error& e);

/// Prints "APP: error: MESSAGE" on stderr; returns `code` for `return fail(...)`.
int fail(const std::string& app, const std::string& message, int code);

/// Seconds since `t0`.
double seconds_since(std::chrono::steady_clock::time_point t0);

}  // namespace cohort::apps
