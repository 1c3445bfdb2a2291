// What a worker records of its tasks when a run is traced (--trace.file): per task, when it
// began waiting for its inputs, when its own work began and when it ended, on the host's
// monotonic clock (steady_clock, nanoseconds; one clock for every process of a host). The
// driver turns the spans into a Chrome trace (apps/driver/trace_file.hpp).
//
//   trace_window w{.first = 10, .last = 19};        // --trace.steps=10:19 (0-based steps)
//   bool traced = w.covers(12);                       // true: the worker records step 12's tasks
//   task_span s{.kind = planner::task_kind::forward, .micro_batch = 3, .wait_ns = 1000, .begin_ns = 1500,
//               .end_ns = 9000, .done_ns = 9400};     // 500 ns waiting, 7.5 us of work, 400 ns sending
//   std::int64_t work = s.end_ns - s.begin_ns;
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "planner/schedule.hpp"

namespace cohort::actors {

struct task_span {
  planner::task_kind kind = planner::task_kind::forward;
  int micro_batch = -1;         // -1: the step's update (the gradient reduction); gather_micro_batch
                                // (update kind): a sharded plan's all-gather at the step's start
  std::int64_t wait_ns = 0;     // began waiting for its data or inputs
  std::int64_t begin_ns = 0;    // its own work began
  std::int64_t end_ns = 0;      // its own work ended (a reduction's included)
  std::int64_t done_ns = 0;     // its sends to other stages, or the hand-over of its gradient, done
  std::int64_t bytes_sent = 0;  // to other stages (activations, gradients) or reduced (update)
  int chunk = 0;                // the rank's chunk (interleaved 1F1B: its stage is chunk x pp + stage)
};

constexpr int gather_micro_batch = -2;

/// The steps a run traces, 0-based and inclusive; first > last: none.
struct trace_window {
  std::int64_t first = 1, last = 0;
  bool covers(std::int64_t step) const { return step >= first && step <= last; }
  bool any() const { return first <= last; }
};

/// The monotonic clock the spans use, in nanoseconds.
inline std::int64_t trace_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace cohort::actors
