// The data cursor's stretches, and a step's samples assembled from the source's batches.
#include "actors/data_cursor.hpp"

#include <algorithm>
#include <cstring>

namespace cohort::actors {

void data_cursor::begin(cursor_stretch s) {
  while (!stretches_.empty() && stretches_.back().step >= s.step) stretches_.pop_back();
  stretches_.push_back(s);
}

cursor_stretch data_cursor::at(std::int64_t step) const {
  if (stretches_.empty()) return {};
  for (auto it = stretches_.rbegin(); it != stretches_.rend(); ++it)
    if (it->step <= step) return *it;
  return stretches_.front();
}

std::int64_t data_cursor::first_sample(std::int64_t step) const {
  const cursor_stretch s = at(step);
  return s.sample + (step - s.step) * s.rows;
}

result<input_batch> stream_rows(const source_fn& source, std::int64_t source_rows, std::int64_t first,
                                std::int64_t count, std::map<std::int64_t, input_batch>& cache) {
  if (source_rows <= 0 || first < 0 || count <= 0)
    return make_error(errc::invalid_argument, "data: samples " + std::to_string(first) + " + " + std::to_string(count) +
                                                  " of batches of " + std::to_string(source_rows));
  const std::int64_t last = first + count - 1;
  for (std::int64_t k = first / source_rows; k <= last / source_rows; ++k) {
    if (cache.count(k) != 0) continue;
    auto made = source(k);
    if (!made) return made.error();
    for (auto& [name, t] : *made) {
      if (t.shape().rank() < 1 || t.shape()[0] != source_rows)
        return make_error(errc::shape_mismatch, "data: input '" + name + "' has batch " + t.shape().to_string() +
                                                    ", the source's batches have " + std::to_string(source_rows) +
                                                    " rows");
      t = t.contiguous();
    }
    cache[k] = std::move(*made);
  }
  const input_batch& head = cache.at(first / source_rows);
  input_batch out;
  for (const auto& [name, t] : head) {
    std::vector<std::int64_t> dims = t.shape().dims();
    dims[0] = count;
    out[name] = tensor::empty(shape(dims), t.type());
  }
  for (std::int64_t at = first; at <= last;) {
    const std::int64_t k = at / source_rows, offset = at % source_rows;
    const std::int64_t take = std::min(source_rows - offset, last + 1 - at);
    const input_batch& from = cache.at(k);
    if (from.size() != out.size())
      return make_error(errc::shape_mismatch, "data: source batch " + std::to_string(k) + " has other inputs");
    for (auto& [name, t] : out) {
      auto it = from.find(name);
      if (it == from.end() || it->second.type() != t.type() || it->second.numel() / source_rows != t.numel() / count)
        return make_error(errc::shape_mismatch, "data: input '" + name + "' differs between source batches " +
                                                    std::to_string(first / source_rows) + " and " + std::to_string(k));
      const std::size_t row_bytes = static_cast<std::size_t>(t.numel() / count) * size_of(t.type());
      std::memcpy(t.data<std::byte>() + static_cast<std::size_t>(at - first) * row_bytes,
                  it->second.data<std::byte>() + static_cast<std::size_t>(offset) * row_bytes,
                  static_cast<std::size_t>(take) * row_bytes);
    }
    at += take;
  }
  return out;
}

}  // namespace cohort::actors
