// Straggler detection and the move that relieves one (issue 18 item 4), as plain functions of
// what every step's job-wide sum tells process 0: each process's seconds per rank of the step
// (what one of its ranks takes alone there). A process is a straggler when the median of its
// seconds per rank over the last `steps` steps is above `factor` times the median of the other
// processes' medians — its peers run the same plan's tasks, so they are the prediction that
// holds on any machine (the cost model's absolute figures drift with the machine; its refit is
// per plan, not per process). Medians over a window, not every step in a row: one step stalled
// by the scheduler (a shared machine preempts any process now and then) neither makes a
// straggler nor hides one. The relief is a migration: one
// rank of the straggler moves to the process that would finish soonest with it, chosen to
// shorten the step the most, predicted from those measured seconds per rank.
//
//   straggler_watch w({.factor = 1.5, .steps = 3});
//   const std::vector<int> owner{0, 0, 1, 1};                 // dp4 over 2 processes
//   for (int s = 0; s < 3; ++s) w.observe({0.010, 0.030}, owner);   // process 1: 3x its peer
//   assert(w.straggler() == 1);
//   auto m = best_move({0.010, 0.030}, owner, 1);             // rank 2 or 3 to process 0
//   assert(m && m->to == 0 && m->predicted_after_s < m->predicted_before_s);
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cohort::actors {

struct straggler_settings {
  double factor = 0;  // 0: never a straggler (detection off)
  int steps = 10;
};

class straggler_watch {
 public:
  explicit straggler_watch(straggler_settings s) : s_(s) {}
  /// One step: `per_rank_s` by process (0 for a process without ranks or not in the job),
  /// `owner` each rank's process.
  void observe(const std::vector<double>& per_rank_s, const std::vector<int>& owner);
  /// The slowest process whose median over the last `steps` steps is above `factor` times its
  /// peers' (-1: none, or fewer than `steps` steps seen since the last reset).
  int straggler() const;
  /// Each process's median seconds per rank over the window (0: not in it throughout).
  std::vector<double> pace() const;
  /// Forget the steps seen (the placement changed: a migration, a transition, a recovery).
  void reset() { window_.clear(); }

 private:
  straggler_settings s_;
  std::vector<std::vector<double>> window_;  // the last `steps` steps' seconds per rank, by process
};

/// A straggler's move checked against the steps it was made for: the median step before it and
/// `steps` steps after. Worse by more than `margin` (its prediction did not hold: the move is
/// undone and no straggler is moved again in the run).
struct move_check {
  double before_s = 0;
  std::vector<double> after_s;
  static constexpr std::size_t steps = 10;
  static constexpr double margin = 0.05;
  /// The step after the move, once enough are in: slower than before by more than the margin.
  bool made_it_worse() const;
};

/// One rank moving from one process to another, and the step it is predicted to give.
struct rank_move {
  int rank = -1, from = -1, to = -1;
  double predicted_before_s = 0, predicted_after_s = 0;  // the busiest process's seconds
  std::string describe() const;                          // "rank 2: process 1 -> process 0"
};

/// The move of one of `from`'s ranks that shortens the step most: a process of n ranks takes its
/// measured seconds per rank (`per_rank_s`, by process: one rank alone) times max(1, n /
/// `cores`) — ranks beyond its cores share them — and the step is the busiest process's;
/// `from` keeps at least one rank. None: no move shortens it.
std::optional<rank_move> best_move(const std::vector<double>& per_rank_s, const std::vector<int>& owner, int from,
                                   int cores = 1);

}  // namespace cohort::actors
