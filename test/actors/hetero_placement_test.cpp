// The heterogeneous pipeline's cores: the embedding stage's workers on the first half of a
// process's cores, the dense stage's on the second, and nobody bound where that cannot hold.
#include <doctest/doctest.h>

#include "actors/hetero_placement.hpp"
#include "planner/rank_layout.hpp"

using namespace cohort;
using namespace cohort::actors;

TEST_CASE("the heterogeneous pipeline binds its two stages to disjoint halves of the cores") {
  planner::parallel_plan one{.dp = 1, .tp = 1, .pp = 2, .micro_batches = 8};
  CHECK(hetero_cores(one, {true, true}, 2) == std::vector<int>{0, 1});
  CHECK(hetero_cores(one, {true, true}, 5) == std::vector<int>{0, 2});  // 2 cores for the lookups, 3 dense
  // dp2 pp2: ranks 0, 1 are stage 0 and 2, 3 stage 1 (rank_layout), round robin in each half
  planner::parallel_plan two{.dp = 2, .tp = 1, .pp = 2, .micro_batches = 4};
  const auto layout = hetero_cores(two, {true, true, true, true}, 4);
  const planner::rank_layout places(two);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    const int stage = places.place_of(r).stage;
    CHECK(layout[static_cast<std::size_t>(r)] >= (stage == 0 ? 0 : 2));
    CHECK(layout[static_cast<std::size_t>(r)] < (stage == 0 ? 2 : 4));
  }
  CHECK(layout[0] != layout[1]);
  CHECK(layout[2] != layout[3]);
  CHECK(describe_hetero_cores(two, layout) == "the lookups' stage on cores 0, 1, the dense stage on cores 2, 3");
  CHECK(describe_hetero_cores(one, hetero_cores(one, {true, true}, 2)) ==
        "the lookups' stage on core 0, the dense stage on core 1");
  // two ranks of a stage on one core each side: they share it
  const auto shared = hetero_cores(two, {true, true, true, true}, 2);
  for (int r = 0; r < 4; ++r) CHECK(shared[static_cast<std::size_t>(r)] == places.place_of(r).stage);
}

TEST_CASE("the heterogeneous pipeline leaves workers unbound on one core, for one stage, or off pp 2") {
  planner::parallel_plan p{.dp = 1, .tp = 1, .pp = 2, .micro_batches = 8};
  CHECK(hetero_cores(p, {true, true}, 1) == std::vector<int>{-1, -1});
  CHECK(describe_hetero_cores(p, {-1, -1}).empty());
  CHECK(hetero_cores(p, {true, false}, 4) == std::vector<int>{-1, -1});  // the other stage in another process
  CHECK(hetero_cores(p, {false, true}, 4) == std::vector<int>{-1, -1});
  planner::parallel_plan three{.dp = 1, .tp = 1, .pp = 3, .micro_batches = 8};
  CHECK(hetero_cores(three, {true, true, true}, 4) == std::vector<int>{-1, -1, -1});
}
