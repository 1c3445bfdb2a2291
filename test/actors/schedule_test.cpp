// The credit rule's task order: 1F1B on every stage for 4 stages x 8 micro-batches, GPipe,
// and the amplifier last — asserted as exact sequences.
#include <doctest/doctest.h>

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
