// Runs of a tensor's flat index: every element of a piece is found once, and the overlap of
// two pieces cut differently copies exactly the elements they share (checked element by
// element against the tensors themselves).
#include <doctest/doctest.h>

#include <algorithm>

#include "graph/flat_runs.hpp"

using namespace cohort;

namespace {

// The flat indices a piece holds, in its order.
std::vector<std::int64_t> elements(const runs& r) {
  std::vector<std::int64_t> out;
  for (const auto& x : r)
    for (std::int64_t i = x.begin; i < x.end; ++i) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("box runs: one run per row of a column block, merged when rows are whole") {
  CHECK(box_runs({4, 6}, {{0, 4}, {0, 3}}) == runs{{0, 3}, {6, 9}, {12, 15}, {18, 21}});
  CHECK(box_runs({4, 6}, {{1, 3}, {0, 6}}) == runs{{6, 18}});
  CHECK(box_runs({5}, {{2, 4}}) == runs{{2, 4}});
  CHECK(box_runs({}, {}) == runs{{0, 1}});
  CHECK(box_runs({4, 6}, {{0, 0}, {0, 6}}).empty());
  // a 3-d box: rows of the last dimension, in row-major order
  CHECK(box_runs({2, 3, 4}, {{0, 2}, {1, 3}, {2, 4}}) == runs{{6, 8}, {10, 12}, {18, 20}, {22, 24}});
}

TEST_CASE("sub runs: a flat range of a piece, cut at run edges") {
  runs left = box_runs({4, 6}, {{0, 4}, {0, 3}});
  CHECK(sub_runs(left, 5, 4) == runs{{8, 9}, {12, 15}});
  CHECK(sub_runs(left, 0, 12) == left);
  CHECK(sub_runs(left, 12, 3).empty());
  CHECK(run_elements(sub_runs(left, 2, 7)) == 7);
}

TEST_CASE("overlap: every shared element is copied once, to and from the right offsets") {
  const shape whole{6, 10};
  // every pairing of: column halves, row thirds, ZeRO-style flat pieces of each
  std::vector<runs> pieces = {box_runs(whole, {{0, 6}, {0, 5}}), box_runs(whole, {{0, 6}, {5, 10}}),
                              box_runs(whole, {{0, 2}, {0, 10}}), box_runs(whole, {{2, 6}, {0, 10}})};
  const runs cols = box_runs(whole, {{0, 6}, {3, 8}});
  pieces.push_back(sub_runs(cols, 0, 13));
  pieces.push_back(sub_runs(cols, 13, 17));
  for (const auto& a : pieces)
    for (const auto& b : pieces) {
      const auto ea = elements(a), eb = elements(b);
      std::vector<std::int64_t> got(eb.size(), -1);
      std::int64_t copied = 0;
      for (const auto& c : overlap(a, b))
        for (std::int64_t k = 0; k < c.count; ++k) {
          CHECK(got[static_cast<std::size_t>(c.to + k)] == -1);  // written once
          got[static_cast<std::size_t>(c.to + k)] = ea[static_cast<std::size_t>(c.from + k)];
          ++copied;
        }
      std::int64_t shared = 0;
      for (std::size_t k = 0; k < eb.size(); ++k) {
        const bool in_a = std::find(ea.begin(), ea.end(), eb[k]) != ea.end();
        shared += in_a ? 1 : 0;
        CHECK(got[k] == (in_a ? eb[k] : -1));  // the same global element, or untouched
      }
      CHECK(copied == shared);
    }
}
