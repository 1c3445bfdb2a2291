// planner::batch_split: any batch over any dp x micro-batches in near-equal shares that cover
// the batch once, contiguous per replica, weighted by their rows.
#include <doctest/doctest.h>

#include <vector>

#include "planner/batch_split.hpp"
#include "planner/plan.hpp"

using cohort::planner::batch_split;

TEST_CASE("128 rows over pp3 m6 are micro-batches of 22 22 21 21 21 21") {
  const batch_split s{.batch = 128, .dp = 1, .micro_batches = 6};
  const std::vector<std::int64_t> rows{22, 22, 21, 21, 21, 21};
  for (int mb = 0; mb < 6; ++mb) CHECK(s.rows(0, mb) == rows[static_cast<std::size_t>(mb)]);
  CHECK(s.first(0, 0) == 0);
  CHECK(s.first(0, 2) == 44);
  CHECK(s.first(0, 5) == 107);
  CHECK(s.replica_rows(0) == 128);
  CHECK(s.largest() == 22);
  CHECK(s.smallest() == 21);
  CHECK_FALSE(s.even());
  CHECK(s.uses(0, 22));
  CHECK(s.uses(0, 21));
}

TEST_CASE("the extra rows go to the first replicas, then to the first micro-batches of each") {
  // 16 rows, dp 3: 6 5 5; dp 2 m 3: each replica 3 3 2
  const batch_split dp3{.batch = 16, .dp = 3, .micro_batches = 1};
  CHECK(dp3.rows(0, 0) == 6);
  CHECK(dp3.rows(1, 0) == 5);
  CHECK(dp3.rows(2, 0) == 5);
  CHECK(dp3.first(1, 0) == 6);
  CHECK(dp3.first(2, 0) == 11);
  CHECK_FALSE(dp3.uses(1, 6));
  const batch_split dp2m3{.batch = 16, .dp = 2, .micro_batches = 3};
  for (int d = 0; d < 2; ++d) {
    CHECK(dp2m3.rows(d, 0) == 3);
    CHECK(dp2m3.rows(d, 1) == 3);
    CHECK(dp2m3.rows(d, 2) == 2);
    CHECK(dp2m3.replica_rows(d) == 8);
  }
  CHECK(dp2m3.first(1, 1) == 11);
  CHECK(dp2m3.first_in_replica(1, 2) == 6);
}

TEST_CASE("every split covers the batch once and the replicas differ by at most one row") {
  for (std::int64_t batch : {1, 7, 16, 97, 128, 1000})
    for (int dp = 1; dp <= 9; ++dp)
      for (int m = 1; m <= 7; ++m) {
        if (batch < static_cast<std::int64_t>(dp) * m) continue;
        CAPTURE(batch);
        CAPTURE(dp);
        CAPTURE(m);
        const batch_split s{batch, dp, m};
        std::int64_t next = 0, most = 0, least = batch;
        double weights = 0;
        for (int d = 0; d < dp; ++d) {
          for (int j = 0; j < m; ++j) {
            CHECK(s.first(d, j) == next);  // contiguous, replica by replica, in order
            CHECK(s.rows(d, j) >= s.smallest());
            CHECK(s.rows(d, j) <= s.largest());
            next += s.rows(d, j);
            weights += s.weight(d, j);
          }
          bool larger = false, smaller = false;
          for (int j = 0; j < m; ++j) (s.rows(d, j) == s.largest() ? larger : smaller) = true;
          CHECK(s.uses(d, s.largest()) == larger);
          CHECK(s.uses(d, s.smallest()) == (smaller || s.even()));
          most = std::max(most, s.replica_rows(d));
          least = std::min(least, s.replica_rows(d));
        }
        CHECK(next == batch);
        CHECK(most - least <= 1);
        CHECK(weights == doctest::Approx(1.0).epsilon(1e-6));
        CHECK(s.largest() - s.smallest() == (s.even() ? 0 : 1));
      }
}

TEST_CASE("an even split weighs each share 1 over dp x m exactly") {
  for (int dp : {1, 2, 4, 8})
    for (int m : {1, 2, 4, 16}) {
      const batch_split s{512, dp, m};
      REQUIRE(s.even());
      CHECK(s.weight(0, 0) == 1.f / static_cast<float>(dp * m));  // bit for bit: runs before the change agree
      CHECK(s.weight(dp - 1, m - 1) == 1.f / static_cast<float>(dp * m));
    }
}

TEST_CASE("a plan needs a row for every share") {
  CHECK(cohort::planner::validate({.dp = 3, .micro_batches = 2}, 6).ok());
  CHECK(cohort::planner::validate({.dp = 3, .micro_batches = 2}, 7).ok());
  auto st = cohort::planner::validate({.dp = 3, .micro_batches = 2}, 5);
  REQUIRE_FALSE(st);
  CHECK(st.error().message == "plan: batch 5 is smaller than dp 3 x micro-batches 2 (every share needs a row)");
}
