// The run report: one self-contained HTML page (inline SVG and CSS, a few lines of inline
// script, nothing fetched) that --report.file writes at the end of a run and every
// --report.every-s while it runs: the plan and the planner's ranked table, predicted against
// measured seconds per stage, the loss curve, throughput over time, a timeline of a few steps
// (pipeline bubbles are its gaps), and each plan change, recovery and checkpoint marked on the
// curves. Process 0 of a job writes it.
//
//   report_options o;
//   o.file = "run.html";                                     // --report.file
//   run_record r;
//   r.app = "mlp";  r.plan = "dp2 tp1 pp1 m1";  r.how = "auto";  r.total_steps = 3;
//   for (int step = 0; step < 3; ++step) r.add_step(step, 2.3 - 0.1 * step, 12000.0, 0.004, {});
//   r.mark(2, "plan change", "dp2 -> dp4");
//   r.finish({{"test_accuracy", 0.91}});
//   if (auto st = write_report(o.file, r); !st) return st;   // through a temporary file and a rename
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/task_trace.hpp"
#include "apps/driver/options.hpp"
#include "graph/error.hpp"
#include "planner/rank_layout.hpp"
#include "planner/task_seconds.hpp"

namespace cohort::apps {

struct report_options {
  std::string file;     // --report.file
  double every_s = 10;  // --report.every-s: rewrite it while the run goes (0: after every step)

  void add_to(option_set& opts);
  /// Errors (exit 2): a negative interval.
  status finish() const;
  bool on() const { return !file.empty(); }
};

/// What the page shows, gathered as the run goes (the coordinator's callbacks add to it).
class run_record {
 public:
  std::string app, plan, how, table, rate_unit = "samples/s";
  nlohmann::json predicted;       // the plan's prediction: step_s and per stage forward/backward/update seconds
  planner::parallel_plan layout;  // the first plan (its ranks' stages, for the per-stage figures)
  int processes = 1;
  std::int64_t total_steps = 0, first_step = 0, warmup = 0;

  /// Step `step` (0-based) done: its loss, the throughput so far, its wall time, every rank's
  /// task seconds (zeros for other processes' ranks); `layout_index` > 0 after a plan change.
  void add_step(std::int64_t step, double loss, double rate, double seconds,
                const std::vector<planner::task_seconds>& tasks, int layout_index = 0);
  /// A worker's task spans of one step; the page keeps those of the first three steps after
  /// the warm-up that it gets (all ranks of this process).
  void add_spans(int rank, const planner::rank_place& at, std::int64_t step,
                 const std::vector<actors::task_span>& spans);
  /// An event after `steps_done` steps: "plan change", "recovery", "checkpoint".
  void mark(std::int64_t steps_done, const std::string& kind, const std::string& text);
  /// The run ended: the summary's figures to show (test accuracy, final loss, ...).
  void finish(const nlohmann::json& summary);

  /// The page.
  std::string html() const;

 private:
  struct span_row {
    int rank;
    std::string name;
    std::vector<std::pair<std::int64_t, actors::task_span>> spans;  // (step, span)
  };
  mutable std::mutex mutex_;
  std::vector<double> losses_, rates_, seconds_;
  std::vector<std::array<double, 3>> stage_sums_;  // measured f, b, u per stage (first plan, timed steps)
  std::vector<int> stage_ranks_;                   // local ranks contributing per stage
  std::int64_t stage_steps_ = 0;
  std::vector<span_row> rows_;
  std::vector<std::int64_t> span_steps_;
  std::vector<nlohmann::json> marks_;
  nlohmann::json summary_;
  bool finished_ = false;
};

/// Writes the page to `path` through a temporary file and a rename (a reader never sees half).
status write_report(const std::string& path, const run_record& r);

}  // namespace cohort::apps
