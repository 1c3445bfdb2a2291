// (ids, offsets) bags to padded rows.
#include "apps/data/bags.hpp"

#include <algorithm>
#include <string>

#include "graph/op.hpp"

namespace cohort::apps {

result<tensor> padded_bags(const std::vector<std::int32_t>& ids, const std::vector<std::int32_t>& offsets,
                           std::int64_t length) {
  const auto n = static_cast<std::int64_t>(ids.size());
  const auto bags = static_cast<std::int64_t>(offsets.size());
  if (bags > 0 && offsets[0] != 0) return make_error(errc::invalid_argument, "padded_bags: offsets must start at 0");
  std::int64_t longest = 0;
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int64_t begin = offsets[static_cast<std::size_t>(b)];
    const std::int64_t end = b + 1 < bags ? offsets[static_cast<std::size_t>(b + 1)] : n;
    if (end < begin || end > n)
      return make_error(errc::invalid_argument, "padded_bags: offset " + std::to_string(b + 1) +
                                                    " decreases or passes the " + std::to_string(n) + " ids");
    longest = std::max(longest, end - begin);
  }
  for (std::int64_t i = 0; i < n; ++i)
    if (ids[static_cast<std::size_t>(i)] < 0)
      return make_error(errc::invalid_argument, "padded_bags: id " + std::to_string(i) + " is negative");
  if (length > 0 && longest > length)
    return make_error(errc::invalid_argument, "padded_bags: a bag of " + std::to_string(longest) +
                                                  " ids does not fit rows of " + std::to_string(length));
  const std::int64_t width = length > 0 ? length : std::max<std::int64_t>(longest, 1);
  tensor out = tensor::empty({bags, width}, dtype::i32);
  std::int32_t* rows = out.data<std::int32_t>();
  std::fill(rows, rows + bags * width, bag_padding);
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int64_t begin = offsets[static_cast<std::size_t>(b)];
    const std::int64_t end = b + 1 < bags ? offsets[static_cast<std::size_t>(b + 1)] : n;
    std::copy(ids.begin() + begin, ids.begin() + end, rows + b * width);
  }
  return out;
}

}  // namespace cohort::apps
