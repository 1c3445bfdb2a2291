// Multi-hot features as embedding_bag takes them: torch.nn.EmbeddingBag's (ids, offsets)
// bags, bag b = ids[offsets[b], offsets[b+1]) (the last to the end), as rows of a [B, L]
// tensor padded with bag_padding (-1) to the longest bag, or to a fixed L for a graph whose
// shapes must not change between batches.
//
//   std::vector<std::int32_t> ids{4, 9, 2, 7, 7}, offsets{0, 2, 2};   // bags {4,9}, {}, {2,7,7}
//   auto bags = padded_bags(ids, offsets);                              // [3, 3]
//   // rows: 4 9 -1 | -1 -1 -1 | 2 7 7
//   auto fixed = padded_bags(ids, offsets, /*length=*/4);               // [3, 4], one more -1 each
#pragma once

#include <cstdint>
#include <vector>

#include "graph/error.hpp"
#include "graph/tensor.hpp"

namespace cohort::apps {

/// Errors: offsets not starting at 0, decreasing or past the ids; a negative id; a bag longer
/// than `length` (when given, i.e. > 0).
result<tensor> padded_bags(const std::vector<std::int32_t>& ids, const std::vector<std::int32_t>& offsets,
                           std::int64_t length = 0);

}  // namespace cohort::apps
