// Straggler detection from the step sums' seconds per rank (a process whose median over the
// last `steps` steps is above `factor` times its peers'), and the one-rank move that shortens
// the step most, predicted from those seconds.
#include <doctest/doctest.h>

#include "actors/straggler_watch.hpp"

using namespace cohort::actors;

TEST_CASE("a process whose median step over the window is slower than its peers is a straggler") {
  straggler_watch w({.factor = 1.5, .steps = 3});
  const std::vector<int> owner{0, 0, 1, 1, 2, 2};
  w.observe({0.010, 0.011, 0.020}, owner);
  w.observe({0.010, 0.011, 0.020}, owner);
  CHECK(w.straggler() == -1);               // two steps: not yet
  w.observe({0.010, 0.011, 0.013}, owner);  // one quick step does not hide it: median 0.020
  CHECK(w.straggler() == 2);
  w.reset();
  CHECK(w.straggler() == -1);
  w.observe({0.010, 0.011, 0.012}, owner);
  w.observe({0.010, 0.050, 0.012}, owner);  // one stalled step (the scheduler) is not a straggler
  w.observe({0.010, 0.011, 0.012}, owner);
  CHECK(w.straggler() == -1);
  w.observe({0.010, 0.050, 0.012}, owner);  // the window's median: 0.050
  CHECK(w.straggler() == 1);
  // of two stragglers, the slower
  straggler_watch two({.factor = 1.5, .steps = 1});
  two.observe({0.010, 0.010, 0.040, 0.030}, {0, 1, 2, 3});
  CHECK(two.straggler() == 2);
  // a process without ranks (0 s) is nobody's peer and never a straggler
  straggler_watch v({.factor = 1.5, .steps = 1});
  v.observe({0.010, 0, 0.030}, {0, 0, 2, 2});
  CHECK(v.straggler() == 2);
  straggler_watch off({.factor = 0, .steps = 1});
  off.observe({0.010, 0.5}, {0, 1});
  CHECK(off.straggler() == -1);
}

TEST_CASE("the move off a straggler is the one that shortens the step most, predicted from the measured pace") {
  // dp4 over 2 processes, process 1 three times slower: 2 x 0.01 against 2 x 0.03
  auto m = best_move({0.010, 0.030}, {0, 0, 1, 1}, 1);
  REQUIRE(m);
  CHECK(m->from == 1);
  CHECK(m->to == 0);
  CHECK(m->rank == 3);  // its last rank
  CHECK(m->predicted_before_s == doctest::Approx(0.060));
  CHECK(m->predicted_after_s == doctest::Approx(0.030));  // max(3 x 0.01, 1 x 0.03)
  CHECK(m->describe() == "rank 3: process 1 -> process 0");
  // three processes: to the fastest that stays below the rest
  auto three = best_move({0.010, 0.014, 0.030}, {0, 0, 1, 1, 2, 2}, 2);
  REQUIRE(three);
  CHECK(three->to == 0);
  CHECK(three->predicted_after_s == doctest::Approx(0.030));
  // nothing to move: one rank left, or no move shortens the step
  CHECK_FALSE(best_move({0.010, 0.030}, {0, 0, 0, 1}, 1));
  CHECK_FALSE(best_move({0.010, 0.012}, {0, 0, 1, 1}, 1));  // 3 x 0.010 > 2 x 0.012
  CHECK_FALSE(best_move({0.010, 0.030}, {0, 0, 1, 1}, 5));
  // two cores per process: each of the straggler's ranks runs at its pace on a core of its own,
  // so taking one away does not shorten its step (the other still takes 0.030)
  CHECK_FALSE(best_move({0.010, 0.030}, {0, 0, 1, 1}, 1, /*cores=*/2));
  // four ranks each on two cores: 2 x 0.030 before, 1.5 x 0.010 and 1 x 0.030 after... the
  // straggler's 3 ranks take 0.045, moving one leaves 2 on its 2 cores: 0.030
  auto shared = best_move({0.010, 0.030}, {0, 0, 1, 1, 1}, 1, /*cores=*/2);
  REQUIRE(shared);
  CHECK(shared->predicted_before_s == doctest::Approx(0.045));
  CHECK(shared->predicted_after_s == doctest::Approx(0.030));
}

TEST_CASE("a straggler's move is undone when the steps after it are slower than before by more than the margin") {
  move_check c;
  c.before_s = 0.020;
  for (int i = 0; i < 9; ++i) c.after_s.push_back(0.030);
  CHECK_FALSE(c.made_it_worse());  // nine steps: not judged yet
  c.after_s.push_back(0.030);
  CHECK(c.made_it_worse());
  move_check better;
  better.before_s = 0.020;
  better.after_s.assign(10, 0.015);
  better.after_s[0] = 0.200;  // the first step after a move (new workers warming up) weighs little
  CHECK_FALSE(better.made_it_worse());
  move_check within;
  within.before_s = 0.020;
  within.after_s.assign(10, 0.0209);  // inside the 5 % margin
  CHECK_FALSE(within.made_it_worse());
}
