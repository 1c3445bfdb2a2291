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
// Interleaved 1F1B (virtual stages): pipeline rank r runs the chunks (stages) r, r + pp, ...
// as one compute stream. Its forward tasks come in Megatron's order — micro-batches in groups
// of pp, each group through chunk 0, then chunk 1, ... — its backward tasks likewise with the
// chunks reversed, and the same rule decides between them: a forward when its input is there
// and the rank's credit (forward tasks ahead of backward ones, parallel_plan::buffer_size)
// allows, else a backward when its input is there. One stage per rank is plain 1F1B/GPipe.
//
// The planner's simulator plays the same orders on modelled durations; the runtime's
// workers run them.
//
//   auto order = build_schedule(4, 8, [](int s) { return 4 - s; });   // 1F1B: 4 stages, 8 micro-batches
//   assert(to_string(order[0]) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 U");
//   assert((order[3][0] == task{task_kind::forward, 0}));
//   auto inter = build_schedule(2, 2, 4, [](int r) { return 2 * (2 - r - 1) + 2 + 1; });   // pp2 v2 m4
//   assert(to_string(inter[1]) == "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3 U");
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace cohort::planner {

enum class task_kind : unsigned char { forward, backward, update };

struct task {
  task_kind kind;
  int micro_batch = -1;  // -1 for update
  int chunk = 0;         // which of the rank's stages (interleaved 1F1B); 0 otherwise
  friend bool operator==(const task&, const task&) = default;
};

std::string to_string(const task& t);                   // "F3", "B0", "U"; chunk 1: "F3.1"
std::string to_string(const std::vector<task>& order);  // "F0 F1 B0 ... U"

/// The task order of every stage for one step.
std::vector<std::vector<task>> build_schedule(int stages, int micro_batches,
                                              const std::function<int(int stage)>& buffer_size);

/// The task order of every pipeline rank for one step when each holds `chunks` stages (rank r:
/// stages r + c * ranks). `credit(r)`: forward tasks it may run ahead of its backward ones.
/// Empty when the rule stalls (a credit too small for the chunks: validate's rules prevent it).
std::vector<std::vector<task>> build_schedule(int ranks, int chunks, int micro_batches,
                                              const std::function<int(int rank)>& credit);

/// The most micro-batches `order` holds in flight on chunk `chunk` (forwarded there, not yet
/// backwarded there).
int most_in_flight(const std::vector<task>& order, int chunk);

/// The most micro-batches a rank holds between its first forward task of one (chunk 0) and its
/// last backward task of it (chunk 0): the buffer slots its worker needs (at least one).
int slots_needed(const std::vector<task>& order);

}  // namespace cohort::planner
