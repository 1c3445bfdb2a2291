// Shapes: element counts, strides, broadcasting, axes.
#include <doctest/doctest.h>

#include "graph/shape.hpp"

using namespace cohort;

TEST_CASE("numel, strides and printing") {
  shape s{4, 1, 3};
  CHECK(s.numel() == 12);
  CHECK(s.contiguous_strides() == std::vector<std::int64_t>{3, 3, 1});
  CHECK(s.to_string() == "[4,1,3]");
  CHECK(shape{}.numel() == 1);
  CHECK(shape{}.to_string() == "[]");
  CHECK(s.at(-1) == 3);
}

TEST_CASE("broadcasting aligns from the right and stretches ones") {
  CHECK(*broadcast_shapes({4, 1, 3}, {5, 3}, "add") == shape{4, 5, 3});
  CHECK(*broadcast_shapes({1}, {2, 2}, "add") == shape{2, 2});
  CHECK(*broadcast_shapes({}, {7}, "add") == shape{7});
  auto bad = broadcast_shapes({2, 3}, {4, 3}, "mul");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == errc::shape_mismatch);
  CHECK(bad.error().message == "mul: cannot broadcast [2,3] with [4,3] (axis -2: 2 vs 4)");
}

TEST_CASE("axes normalize from the end and are range-checked") {
  CHECK(*normalize_axis(-1, 3, "sum") == 2);
  CHECK(*normalize_axis(0, 3, "sum") == 0);
  auto bad = normalize_axis(3, 3, "sum");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "sum: axis 3 out of range for rank 3");
}
