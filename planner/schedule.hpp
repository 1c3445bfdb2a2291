// Credit-based pipeline scheduling. Every stage runs a task when its input is there and its
// output has room: a forward task needs the previous stage's activation and a free slot in
// the stage's buffer (micro-batches forwarded but not yet backwarded); a backward task needs
// the next stage's gradient. Forward tasks win when both are ready. The buffer size is the
// whole difference between schedules: GPipe = every micro-batch, 1F1B = pp - stage. After
// its last backward task each stage runs the amplifier task (gradient reduction, optimizer).
//
// build() plays the rule out in lock-step rounds, which gives each stage a fixed task order;
// every tensor-parallel rank of a stage then follows the same order, so their collectives
// always meet.
//
// The planner's simulator plays the same orders on modelled durations; the runtime's
// workers run them.
//
//   auto order = build_schedule(4, 8, [](int s) { return 4 - s; });   // 1F1B: 4 stages, 8 micro-batches
//   assert(to_string(order[0]) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 U");
//   assert((order[3][0] == task{task_kind::forward, 0}));
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace cohort::planner {

enum class task_kind : unsigned char { forward, backward, update };

struct task {
  task_kind kind;
  int micro_batch = -1;  // -1 for update
  friend bool operator==(const task&, const task&) = default;
};

std::string to_string(const task& t);                   // "F3", "B0", "U"
std::string to_string(const std::vector<task>& order);  // "F0 F1 B0 ... U"

/// The task order of every stage for one step.
std::vector<std::vector<task>> build_schedule(int stages, int micro_batches,
                                              const std::function<int(int stage)>& buffer_size);

}  // namespace cohort::planner
