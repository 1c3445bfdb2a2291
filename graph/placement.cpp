// Placement names and near-equal shard ranges.
#include "graph/placement.hpp"

namespace cohort {

std::string to_string(const placement& p) {
  if (is_replicate(p)) return "R";
  if (is_partial(p)) return "P";
  const shard& s = std::get<shard>(p);
  std::string out = "S(" + std::to_string(s.dim);
  if (s.granule != 1) out += "/" + std::to_string(s.granule);
  if (s.owner >= 0) out += "@" + std::to_string(s.owner);
  if (s.owner == shard::one_part) out += "@?";
  return out + ")";
}

range shard_range(std::int64_t extent, std::int64_t parts, std::int64_t index, std::int64_t granule) {
  std::int64_t units = extent / granule;
  std::int64_t base = units / parts, extra = units % parts;
  std::int64_t begin = index * base + (index < extra ? index : extra);
  std::int64_t size = base + (index < extra ? 1 : 0);
  return {begin * granule, (begin + size) * granule};
}

range shard_part(const shard& s, std::int64_t extent, std::int64_t parts, std::int64_t index) {
  if (s.owner >= 0) return index == s.owner ? range{0, extent} : range{0, 0};
  return shard_range(extent, parts, index, s.granule);
}

}  // namespace cohort
