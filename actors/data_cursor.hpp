// The data cursor: which samples of the data stream each step trains on. The app's source
// yields the stream in source batches of one size S (source batch k: samples [k S, (k+1) S));
// a step takes the plan's global batch, the next step the samples after it. A job whose batch
// never changes takes source batch k at step k (no copy); under --elastic.batch=scale the
// global batch grows and shrinks with the data-parallel degree, and a step's samples may span
// two source batches. The cursor keeps where each stretch of equal batches began, so a step
// redone after a recovery, or a job rolled back to a checkpoint, reads the same samples again.
//
//   data_cursor c;
//   c.begin({.step = 0, .sample = 0, .rows = 128});                      // 128 samples a step
//   c.begin({.step = 10, .sample = c.first_sample(10), .rows = 256});    // dp doubled after step 9
//   assert(c.first_sample(12) == 10 * 128 + 2 * 256);
//   source_fn source = [](std::int64_t k) -> result<input_batch> { return input_batch{{"x", tensor::full({128, 4}, float(k))}}; };
//   std::map<std::int64_t, input_batch> cache;
//   auto rows = stream_rows(source, /*source_rows=*/128, /*first=*/64, /*count=*/128, cache);  // halves of batches 0 and 1
//   assert(rows && rows->at("x").shape() == (shape{128, 4}) && cache.size() == 2);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/error.hpp"
#include "graph/tensor.hpp"

namespace cohort::actors {

/// From `step` on, each step takes `rows` samples, step `step` the first at `sample`.
struct cursor_stretch {
  std::int64_t step = 0, sample = 0, rows = 0;
};

class data_cursor {
 public:
  /// A new stretch from s.step on; the stretches from that step on are forgotten (a job rolled
  /// back to an earlier step goes on from there).
  void begin(cursor_stretch s);
  /// The first sample of step `step` (a step before the first stretch: its start, stepped back).
  std::int64_t first_sample(std::int64_t step) const;
  /// The stretch `step` is in (the first, before it); empty cursor: a stretch of nothing.
  cursor_stretch at(std::int64_t step) const;
  bool empty() const { return stretches_.empty(); }
  const std::vector<cursor_stretch>& stretches() const { return stretches_; }

 private:
  std::vector<cursor_stretch> stretches_;  // ascending step
};

using input_batch = std::map<std::string, tensor>;
using source_fn = std::function<result<input_batch>(std::int64_t source_batch)>;

/// Samples [first, first + count) of the stream that `source` yields in batches of
/// `source_rows` (every input [source_rows, ...]), concatenated along the first dimension.
/// `cache` keeps the source batches read (the caller trims it). Errors: the source's, an input
/// of another batch size, inputs that differ between source batches.
result<input_batch> stream_rows(const source_fn& source, std::int64_t source_rows, std::int64_t first,
                                std::int64_t count, std::map<std::int64_t, input_batch>& cache);

}  // namespace cohort::actors
