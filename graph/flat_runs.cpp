// Runs of a tensor's flat index: boxes, sub-ranges, overlaps.
#include "graph/flat_runs.hpp"

#include <algorithm>

namespace cohort {

runs box_runs(const shape& whole, const std::vector<range>& box) {
  runs out;
  const std::size_t n = whole.rank();
  if (box.size() != n) return out;
  for (const auto& b : box)
    if (b.end <= b.begin) return out;
  if (n == 0) return {{0, 1}};
  // strides of the whole tensor; the last dimension's range is one run per index of the others
  std::vector<std::int64_t> stride(n, 1);
  for (std::size_t d = n - 1; d > 0; --d) stride[d - 1] = stride[d] * whole[d];
  std::vector<std::int64_t> at(n);
  for (std::size_t d = 0; d < n; ++d) at[d] = box[d].begin;
  while (true) {
    std::int64_t base = 0;
    for (std::size_t d = 0; d + 1 < n; ++d) base += at[d] * stride[d];
    const range r{base + box[n - 1].begin, base + box[n - 1].end};
    if (!out.empty() && out.back().end == r.begin)
      out.back().end = r.end;
    else
      out.push_back(r);
    // next index of the leading dimensions, last fastest
    std::size_t d = n - 1;
    while (d > 0) {
      --d;
      if (++at[d] < box[d].end) break;
      at[d] = box[d].begin;
      if (d == 0) return out;
    }
    if (n == 1) return out;
  }
}

runs sub_runs(const runs& r, std::int64_t first, std::int64_t count) {
  runs out;
  std::int64_t seen = 0;
  const std::int64_t last = first + count;
  for (const auto& x : r) {
    const std::int64_t len = x.end - x.begin;
    const std::int64_t lo = std::max(first, seen), hi = std::min(last, seen + len);
    if (lo < hi) out.push_back({x.begin + (lo - seen), x.begin + (hi - seen)});
    seen += len;
    if (seen >= last) break;
  }
  return out;
}

std::int64_t run_elements(const runs& r) {
  std::int64_t n = 0;
  for (const auto& x : r) n += x.end - x.begin;
  return n;
}

std::vector<run_copy> overlap(const runs& source, const runs& destination) {
  std::vector<run_copy> out;
  std::size_t i = 0, j = 0;
  std::int64_t at_source = 0, at_destination = 0;  // piece offsets of runs i and j
  while (i < source.size() && j < destination.size()) {
    const range& s = source[i];
    const range& d = destination[j];
    const std::int64_t lo = std::max(s.begin, d.begin), hi = std::min(s.end, d.end);
    if (lo < hi) {
      run_copy c{at_source + (lo - s.begin), at_destination + (lo - d.begin), hi - lo};
      if (!out.empty() && out.back().from + out.back().count == c.from && out.back().to + out.back().count == c.to)
        out.back().count += c.count;
      else
        out.push_back(c);
    }
    if (s.end <= d.end)
      at_source += s.end - s.begin, ++i;
    else
      at_destination += d.end - d.begin, ++j;
  }
  return out;
}

}  // namespace cohort
