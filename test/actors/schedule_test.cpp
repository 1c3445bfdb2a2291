// The credit rule's task order: 1F1B on every stage for 4 stages x 8 micro-batches, GPipe,
// and the amplifier last — asserted as exact sequences.
#include <doctest/doctest.h>

#include <set>

#include "planner/plan.hpp"
#include "planner/schedule.hpp"

using namespace cohort;
using namespace cohort::planner;

TEST_CASE("1F1B order on every stage for 4 stages x 8 micro-batches") {
  planner::parallel_plan p{.pp = 4, .micro_batches = 8};
  auto order = build_schedule(4, 8, [&](int s) { return p.buffer_size(s); });
  REQUIRE(order.size() == 4);
  CHECK(to_string(order[0]) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 U");
  CHECK(to_string(order[1]) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7 U");
  CHECK(to_string(order[2]) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7 U");
  CHECK(to_string(order[3]) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 U");
}

TEST_CASE("GPipe is the same rule with a buffer for every micro-batch") {
  planner::parallel_plan p{.pp = 3, .micro_batches = 4, .schedule = planner::schedule_kind::gpipe};
  auto order = build_schedule(3, 4, [&](int s) { return p.buffer_size(s); });
  for (const auto& stage : order) CHECK(to_string(stage) == "F0 F1 F2 F3 B0 B1 B2 B3 U");
}

TEST_CASE("one stage, and more stages than micro-batches") {
  CHECK(to_string(build_schedule(1, 3, [](int) { return 1; })[0]) == "F0 B0 F1 B1 F2 B2 U");
  auto order = build_schedule(4, 2, [](int s) { return 4 - s; });
  CHECK(to_string(order[0]) == "F0 F1 B0 B1 U");
  CHECK(to_string(order[3]) == "F0 B0 F1 B1 U");
}

TEST_CASE("a stage never holds more micro-batches in flight than its buffer") {
  for (int pp = 1; pp <= 5; ++pp)
    for (int m = 1; m <= 9; ++m) {
      auto order = build_schedule(pp, m, [&](int s) { return pp - s; });
      for (int s = 0; s < pp; ++s) {
        int in_flight = 0, most = 0, forwards = 0, backwards = 0;
        for (const auto& t : order[static_cast<std::size_t>(s)]) {
          if (t.kind == task_kind::forward) {
            ++in_flight;
            ++forwards;
          }
          if (t.kind == task_kind::backward) {
            --in_flight;
            ++backwards;
          }
          most = std::max(most, in_flight);
        }
        CAPTURE(pp);
        CAPTURE(m);
        CAPTURE(s);
        CHECK(most <= pp - s);
        CHECK(forwards == m);
        CHECK(backwards == m);
        CHECK(order[static_cast<std::size_t>(s)].back().kind == task_kind::update);
      }
    }
}

// Interleaved 1F1B (virtual stages): rank r runs stages r, r + pp, ... ("F3.1": micro-batch 3
// on the rank's chunk 1). Megatron's order: micro-batches in groups of pp through chunk 0,
// then chunk 1; backward with the chunks reversed; the credit is Megatron's warm-up + 1.
TEST_CASE("interleaved 1F1B order for pp2 v2 m4") {
  planner::parallel_plan p{.pp = 2, .micro_batches = 4, .virtual_stages = 2};
  CHECK(p.buffer_size(0) == 5);  // 2 (2 - 0 - 1) + (2 - 1) 2 + 1
  CHECK(p.buffer_size(1) == 3);
  auto order = build_schedule(2, 2, 4, [&](int r) { return p.buffer_size(r); });
  REQUIRE(order.size() == 2);
  CHECK(to_string(order[0]) == "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3 U");
  CHECK(to_string(order[1]) == "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3 U");
  CHECK(slots_needed(order[0]) == 4);  // micro-batches 0-3 between their first and last task
  CHECK(slots_needed(order[1]) == 3);
  CHECK(most_in_flight(order[0], 0) == 4);
  CHECK(most_in_flight(order[0], 1) == 2);  // F0.1 F1.1, then one backward before the next forward
  // one chunk per rank is the plain schedule
  planner::parallel_plan plain{.pp = 4, .micro_batches = 8};
  CHECK(build_schedule(4, 1, 8, [&](int r) { return plain.buffer_size(r); }) ==
        build_schedule(4, 8, [&](int r) { return plain.buffer_size(r); }));
}

// Replays the rank orders as a dataflow: each rank runs its next task once its input exists
// (forward of stage s: stage s - 1's forward of that micro-batch; backward: stage s + 1's
// backward, the last stage its own forward). Every task must run: the orders never deadlock.
static bool orders_complete(int pp, int v, int m, const std::vector<std::vector<task>>& order) {
  const int stages = pp * v;
  std::vector<std::vector<bool>> f(static_cast<std::size_t>(stages), std::vector<bool>(static_cast<std::size_t>(m))),
      b = f;
  std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < pp; ++r) {
      auto& i = next[static_cast<std::size_t>(r)];
      const auto& o = order[static_cast<std::size_t>(r)];
      if (i >= o.size()) continue;
      const task& t = o[i];
      if (t.kind == task_kind::update) {
        ++i, moved = true;
        continue;
      }
      const auto s = static_cast<std::size_t>(t.chunk * pp + r), mb = static_cast<std::size_t>(t.micro_batch);
      const bool ready = t.kind == task_kind::forward
                             ? (s == 0 || f[s - 1][mb])
                             : (s + 1 == static_cast<std::size_t>(stages) ? f[s][mb] : b[s + 1][mb]);
      if (!ready) continue;
      (t.kind == task_kind::forward ? f : b)[s][mb] = true;
      ++i, moved = true;
    }
  }
  for (int r = 0; r < pp; ++r)
    if (next[static_cast<std::size_t>(r)] != order[static_cast<std::size_t>(r)].size()) return false;
  return true;
}

TEST_CASE("interleaved orders run every task once and never deadlock, within the credit") {
  for (int pp = 2; pp <= 6; ++pp)
    for (int v = 2; v <= 4; ++v)
      for (int groups = 1; groups <= 4; ++groups) {
        const int m = pp * groups;
        planner::parallel_plan p{.pp = pp, .micro_batches = m, .virtual_stages = v};
        REQUIRE(validate(p, 1024).ok());
        auto order = build_schedule(pp, v, m, [&](int r) { return p.buffer_size(r); });
        CAPTURE(pp);
        CAPTURE(v);
        CAPTURE(m);
        REQUIRE(order.size() == static_cast<std::size_t>(pp));
        CHECK(orders_complete(pp, v, m, order));
        for (int r = 0; r < pp; ++r) {
          const auto& o = order[static_cast<std::size_t>(r)];
          std::set<std::pair<int, int>> forwards, backwards;
          int ahead = 0, most = 0;
          for (const auto& t : o) {
            if (t.kind == task_kind::forward) forwards.insert({t.micro_batch, t.chunk}), most = std::max(most, ++ahead);
            if (t.kind == task_kind::backward) backwards.insert({t.micro_batch, t.chunk}), --ahead;
          }
          CHECK(forwards.size() == static_cast<std::size_t>(m * v));
          CHECK(backwards.size() == static_cast<std::size_t>(m * v));
          CHECK(most <= p.buffer_size(r));
          CHECK(o.back().kind == task_kind::update);
          CHECK(o.size() == static_cast<std::size_t>(2 * m * v + 1));
        }
      }
}

TEST_CASE("a credit too small for the chunks stalls, and says so with an empty order") {
  // rank 0 may hold one micro-batch ahead: its chunk 1 waits for stage 2's input, which waits
  // for rank 0's own next forward
  CHECK(build_schedule(2, 2, 4, [](int) { return 1; }).empty());
  planner::parallel_plan p{.pp = 2, .micro_batches = 3, .virtual_stages = 2};
  CHECK_FALSE(validate(p, 64).ok());  // micro-batches not in whole groups of pp
  p.micro_batches = 4;
  CHECK(validate(p, 64).ok());
  p.pp = 1;
  CHECK_FALSE(validate(p, 64).ok());  // interleaving needs a pipeline
}
