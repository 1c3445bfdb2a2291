// A run's timeline in the Chrome trace event format, which chrome://tracing and Perfetto
// (ui.perfetto.dev) open: --trace.file=F writes every worker's tasks (forward and backward per
// micro-batch, the gradient reduction, the wait for each task's inputs) as complete events,
// one track per rank under one process per OS process, and the run's events (plan
// transitions, recoveries, checkpoints) as instant events; --trace.steps=A:B bounds it. A job
// of several processes merges every process's events into process 0's file, their clocks
// aligned by an offset measured over the control plane (the residual is in the file's
// "otherData").
//
//   trace_options t;
//   t.file = "run.json";  t.steps = "3:5";                 // --trace.file, --trace.steps (1-based)
//   if (auto st = t.finish(); !st) return st;               // a bad range: exit 2, named
//   trace_recorder rec(/*process=*/0);
//   rec.add_spans(/*rank=*/0, {.dp_rank = 0, .stage = 0, .tp_rank = 0}, /*step=*/2,
//                 {{planner::task_kind::forward, 0, 1000, 1500, 9000, 9400, 0}});
//   rec.mark("checkpoint", {{"step", 3}});                 // an instant event, now
//   if (auto st = write_trace(t.file, rec.events(), {{"plan", "dp1 tp1 pp1 m1"}}); !st) return st;
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/task_trace.hpp"
#include "apps/driver/options.hpp"
#include "graph/error.hpp"
#include "planner/rank_layout.hpp"
#include "transport/control_plane.hpp"

namespace cohort::apps {

/// The steps a trace covers when --trace.steps does not say (a long run's trace stays bounded).
constexpr std::int64_t default_traced_steps = 100;

struct trace_options {
  std::string file;             // --trace.file
  std::string steps;            // --trace.steps=A:B, 1-based and inclusive; empty: the first 100
  actors::trace_window window;  // --trace.steps parsed by finish (0-based); not set: the default

  /// The steps to trace in a run whose first step is `first_step` (0-based; a resumed run's is
  /// past 0): --trace.steps, or the first default_traced_steps of this run.
  actors::trace_window steps_from(std::int64_t first_step) const {
    return steps.empty() ? actors::trace_window{first_step, first_step + default_traced_steps - 1} : window;
  }

  void add_to(option_set& opts);
  /// Errors (exit 2): a malformed range, A > B, A < 1, --trace.steps without --trace.file.
  status finish();
  bool on() const { return !file.empty(); }
};

/// One process's events, as the coordinator hands them over (its thread) and the driver
/// marks them; times on the host's monotonic clock.
class trace_recorder {
 public:
  explicit trace_recorder(int process) : process_(process) {}
  /// A worker's spans of one step; `at`: where the rank was in the plan of that step.
  void add_spans(int rank, const planner::rank_place& at, std::int64_t step,
                 const std::vector<actors::task_span>& spans);
  /// An instant event on the process's run track, at `at_ns` (default: now).
  void mark(const std::string& name, nlohmann::json args, std::int64_t at_ns = actors::trace_clock_ns());
  /// The trace events (Chrome format, "ts" in microseconds of the monotonic clock, plus
  /// `offset_us`), with the names of the process and its tracks.
  nlohmann::json events(double offset_us = 0) const;

 private:
  mutable std::mutex mutex_;
  int process_;
  nlohmann::json events_ = nlohmann::json::array();
  std::vector<std::pair<int, std::string>> ranks_;                       // tracks seen, named by the first place
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> steps_;  // step -> [first, last] ns
};

/// Writes {"traceEvents": events (times made relative to the earliest), "displayTimeUnit":
/// "ms", "otherData": other} to `path` (through a temporary file and a rename).
status write_trace(const std::string& path, nlohmann::json events, const nlohmann::json& other);

/// A job's trace on process 0: each process's events with its clock moved onto process 0's
/// (the offset from the quickest of `rounds` round trips over the control plane: process 0's
/// time is broadcast, each process notes when it arrived and tells it back; the residual is
/// half that round trip), sent in lines of the control plane's size. Every process calls it
/// at the same point. On process 0: {"events": [...], "offsets_us": [...], "residual_us":
/// [...]}; elsewhere an empty object.
result<nlohmann::json> gather_trace(transport::control_plane& control, const trace_recorder& mine,
                                    std::uint64_t clock_key, std::uint64_t lines_key, int rounds = 5);

/// The track id of a process's run events (transitions, recoveries, checkpoints, steps).
constexpr int run_track = 1000000;

}  // namespace cohort::apps
