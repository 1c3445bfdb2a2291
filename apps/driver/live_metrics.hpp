// What a running job tells Prometheus (--metrics.listen): the figures the driver sees as steps,
// plan changes, recoveries and checkpoints come, rendered in the text exposition format at each
// scrape. Process 0 of a job serves them (it knows the job's loss).
//
//   live_metrics m;
//   m.start("mlp", "dp2 tp1 pp1 m1", /*processes=*/1, "samples", /*predicted_step_s=*/0.004, /*steps=*/100);
//   m.step(1, 2.3, 12000.0, 0.0042, {{0.001, 0.002, 0.0005}, {0.001, 0.002, 0.0004}});
//   std::string text = m.text();   // "# TYPE cohort_step gauge\ncohort_step 1\n..."
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "apps/driver/options.hpp"
#include "graph/error.hpp"
#include "planner/task_seconds.hpp"

namespace cohort::apps {

struct prometheus_options {
  std::string listen;   // --metrics.listen=HOST:PORT
  double linger_s = 0;  // --metrics.linger-s: keep serving this long after the run (a last scrape)
  void add_to(option_set& opts);
  /// Errors (exit 2): a malformed address, a negative linger, a linger without a listener.
  status finish() const;
  bool on() const { return !listen.empty(); }
};

class live_metrics {
 public:
  void start(std::string app, std::string plan, int processes, std::string unit, double predicted_step_s,
             std::int64_t total_steps);
  /// After `steps_done` steps: the loss, items per second, the step's seconds, every rank's
  /// task seconds this step (zeros for other processes' ranks).
  void step(std::int64_t steps_done, double loss, double rate, double step_s,
            const std::vector<planner::task_seconds>& tasks);
  void transition(const std::string& to);
  void recovery();
  void checkpoint(bool written);
  /// Where the planes' byte counts and the live processes come from (called at each scrape;
  /// empty: 0, every process).
  void sources(std::function<std::uint64_t()> data_plane_bytes, std::function<std::uint64_t()> control_plane_bytes,
               std::function<int()> live_processes);
  void finished();
  /// Reads the sources once more and keeps those values (their owners are going).
  void freeze_sources();
  std::string text() const;

 private:
  mutable std::mutex mutex_;
  std::string app_, plan_, unit_ = "samples";
  int processes_ = 1;
  double predicted_step_s_ = 0;
  std::int64_t total_steps_ = 0, steps_ = 0;
  double loss_ = 0, rate_ = 0, step_s_ = 0;
  std::vector<double> busy_;  // by rank: task seconds / step seconds (local ranks)
  std::int64_t transitions_ = 0, recoveries_ = 0, checkpoints_ = 0, checkpoint_failures_ = 0;
  bool finished_ = false;
  std::function<std::uint64_t()> bytes_, control_bytes_;
  std::function<int()> live_;
};

}  // namespace cohort::apps
