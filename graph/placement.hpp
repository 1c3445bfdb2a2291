// Placements: how a tensor lives on one mesh axis. Shard(d) splits dimension d into
// near-equal contiguous parts (the first `extent % parts` parts one larger, in units of
// `granule` elements so that a split head or row stays whole); Replicate keeps a full copy
// on every rank of the axis; Partial(sum) keeps on each rank a full-shaped addend of the
// true value. A tensor's dist_attr has one placement per mesh axis. A shard may instead keep
// the whole extent on one part and nothing on the others (`shard::owner`): an embedding table
// sharded table-wise lives whole on one tensor-parallel rank.
//
//   placement p = shard{1};
//   assert(to_string(p) == "S(1)" && to_string(partial{}) == "P");
//   shard table_wise{0, 1, /*owner=*/2};                       // rows of a table, all on part 2
//   assert((shard_part(table_wise, 1000, 4, 2) == range{0, 1000}) && shard_part(table_wise, 1000, 4, 1).size() == 0);
//   assert((shard_range(10, 3, 0) == range{0, 4}) && (shard_range(10, 3, 2) == range{7, 10}));
//   assert((shard_range(256, 3, 1, /*granule=*/64) == range{128, 192}));   // 4 heads of 64 over 3 ranks
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace cohort {

struct replicate {
  friend bool operator==(const replicate&, const replicate&) = default;
};
struct shard {
  /// owner values beside a part index: near-equal parts, or (an annotation) the whole extent
  /// on one part that completion picks, balancing the bytes of every value annotated so
  static constexpr int split = -1, one_part = -2;
  int dim = 0;
  std::int64_t granule = 1;  // shard boundaries fall on multiples of this
  int owner = split;         // split, one_part, or the part index that holds the whole extent
  friend bool operator==(const shard&, const shard&) = default;
};
struct partial {
  friend bool operator==(const partial&, const partial&) = default;
};

using placement = std::variant<replicate, shard, partial>;

std::string to_string(const placement& p);  // "R", "S(1)", "S(1/64)", "S(0@2)" (owner 2), "P"

inline bool is_replicate(const placement& p) { return std::holds_alternative<replicate>(p); }
inline bool is_partial(const placement& p) { return std::holds_alternative<partial>(p); }
inline const shard* as_shard(const placement& p) { return std::get_if<shard>(&p); }

/// [begin, end) of part `index` when `extent` is split into `parts` near-equal parts whose
/// boundaries are multiples of `granule` (extent must be a multiple of granule).
struct range {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
  friend bool operator==(const range&, const range&) = default;
};
range shard_range(std::int64_t extent, std::int64_t parts, std::int64_t index, std::int64_t granule = 1);

/// Part `index`'s range of a shard: shard_range's near-equal part, or for a shard with an
/// owner the whole extent on the owner and an empty range {0, 0} elsewhere.
range shard_part(const shard& s, std::int64_t extent, std::int64_t parts, std::int64_t index);

}  // namespace cohort
