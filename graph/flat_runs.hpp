// A piece of a tensor described by the elements it holds: runs [begin, end) of the whole
// tensor's row-major flat index, ascending, whose concatenation is the piece's own element
// order. A tensor-parallel shard (a box) is one run per row of the box; a ZeRO piece of a
// stage's flat parameter buffer (a contiguous range across parameters) is a sub-range of
// those. Two pieces of one tensor, however they were cut, overlap in copies that move whole
// runs — what a plan transition moves from an old layout to a new one, and what a checkpoint
// records per piece.
//
//   runs left = box_runs({4, 6}, {{0, 4}, {0, 3}});    // columns 0-2: {0,3} {6,9} {12,15} {18,21}
//   runs top  = box_runs({4, 6}, {{0, 2}, {0, 6}});    // rows 0-1: {0,12}
//   auto copies = overlap(left, top);                   // {from 0, to 0, 3}, {from 3, to 6, 3}
//   assert((copies == std::vector<run_copy>{{0, 0, 3}, {3, 6, 3}}));
//   runs tail = sub_runs(left, 5, 4);                   // elements 5..8 of `left`: {8,9} {12,15}
//   assert(run_elements(tail) == 4);
#pragma once

#include <cstdint>
#include <vector>

#include "graph/placement.hpp"
#include "graph/shape.hpp"

namespace cohort {

using runs = std::vector<range>;

/// The runs of the box `box` (one [begin, end) per dimension) of a row-major tensor shaped
/// `whole`; adjacent runs are merged. An empty box has no runs.
runs box_runs(const shape& whole, const std::vector<range>& box);

/// Elements [first, first + count) of a piece whose elements are `r`, as runs.
runs sub_runs(const runs& r, std::int64_t first, std::int64_t count);

/// Elements in `r` (the sum of the run lengths).
std::int64_t run_elements(const runs& r);

/// One copy between two pieces: `count` elements from offset `from` of the source piece to
/// offset `to` of the destination piece.
struct run_copy {
  std::int64_t from = 0, to = 0, count = 0;
  friend bool operator==(const run_copy&, const run_copy&) = default;
};

/// The elements two pieces of one tensor have in common, as copies in ascending order.
std::vector<run_copy> overlap(const runs& source, const runs& destination);

}  // namespace cohort
