// A process mesh: ranks laid out on an n-d grid with named axes, e.g. {dp:2, pp:2, tp:2}
// for 8 ranks. A rank's coordinate on each axis says which replica, stage and shard it is;
// the ranks that differ from it on one axis only form its group on that axis (the ranks a
// collective over that axis runs among).
//
//   process_mesh m({{"dp", 2}, {"pp", 2}, {"tp", 2}});   // ranks 0..7, tp fastest
//   assert(m.coordinate(5, "dp") == 1 && m.coordinate(5, "pp") == 0 && m.coordinate(5, "tp") == 1);
//   assert(m.group(5, "dp") == (std::vector<int>{1, 5}));
//   result<process_mesh> bad = make_mesh({{"dp", 0}});    // !bad: sizes are at least 1
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.hpp"

namespace cohort {

class process_mesh {
 public:
  process_mesh() = default;
  /// Axes outermost first; ranks are numbered row-major over them (the last axis fastest).
  explicit process_mesh(std::vector<std::pair<std::string, std::int64_t>> axes);

  int rank_count() const { return static_cast<int>(size_); }
  int axis_count() const { return static_cast<int>(axes_.size()); }
  const std::string& axis_name(int axis) const { return axes_[static_cast<std::size_t>(axis)].first; }
  std::int64_t axis_size(int axis) const { return axes_[static_cast<std::size_t>(axis)].second; }
  /// Index of the axis called `name`, or -1.
  int axis_index(const std::string& name) const;
  /// Size of the axis called `name`; 1 when the mesh has no such axis.
  std::int64_t size_of(const std::string& name) const;

  std::vector<std::int64_t> coordinates(int rank) const;
  std::int64_t coordinate(int rank, const std::string& axis) const;
  int rank_at(const std::vector<std::int64_t>& coords) const;
  /// The ranks that share every coordinate with `rank` except on `axis`, in axis order.
  std::vector<int> group(int rank, const std::string& axis) const;
  std::string to_string() const;  // "{dp:2,pp:2,tp:2}"

  friend bool operator==(const process_mesh&, const process_mesh&) = default;

 private:
  std::vector<std::pair<std::string, std::int64_t>> axes_;
  std::int64_t size_ = 1;
};

/// Validates axis sizes (>= 1) and names (unique, non-empty).
result<process_mesh> make_mesh(std::vector<std::pair<std::string, std::int64_t>> axes);

}  // namespace cohort
