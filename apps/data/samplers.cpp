// Step-deterministic samplers.
#include "apps/data/samplers.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace cohort::apps {

epoch_sampler::epoch_sampler(const labeled_set& set, std::int64_t batch, std::uint64_t seed)
    : set_(set), batch_(batch), seed_(seed) {
  restart();
}

void epoch_sampler::restart() {
  order_ = rng(seed_);
  perm_.resize(static_cast<std::size_t>(set_.size()));
  std::iota(perm_.begin(), perm_.end(), 0);
  shuffle();
  pos_ = 0;
  next_step_ = 0;
}

void epoch_sampler::shuffle() {
  for (std::int64_t i = static_cast<std::int64_t>(perm_.size()) - 1; i > 0; --i)
    std::swap(perm_[static_cast<std::size_t>(i)], perm_[order_.below(static_cast<std::uint64_t>(i + 1))]);
}

std::map<std::string, tensor> epoch_sampler::batch_at(std::int64_t step) {
  if (step < next_step_) restart();
  const std::int64_t f = set_.x.shape()[1], n = set_.size();
  tensor x = tensor::empty({batch_, f});
  tensor y = tensor::empty({batch_}, dtype::i32);
  while (next_step_ <= step) {
    if (pos_ + batch_ > n) {
      shuffle();
      pos_ = 0;
    }
    if (next_step_ == step)
      for (std::int64_t i = 0; i < batch_; ++i) {
        std::int64_t row = perm_[static_cast<std::size_t>(pos_ + i)];
        std::memcpy(x.data<float>() + i * f, set_.x.data<float>() + row * f,
                    static_cast<std::size_t>(f) * sizeof(float));
        y.data<std::int32_t>()[i] = set_.y.data<std::int32_t>()[row];
      }
    pos_ += batch_;
    ++next_step_;
  }
  return {{"x", x}, {"y", y}};
}

column_set rows_of(const column_set& table, std::int64_t begin, std::int64_t count) {
  column_set out;
  for (const auto& [name, t] : table) {
    std::vector<std::int64_t> dims = t.shape().dims();
    const std::size_t row_bytes = static_cast<std::size_t>(dims[0] > 0 ? t.numel() / dims[0] : 0) * size_of(t.type());
    dims[0] = count;
    tensor part = tensor::empty(shape(dims), t.type());
    std::memcpy(part.data<std::byte>(), t.data<std::byte>() + static_cast<std::size_t>(begin) * row_bytes,
                static_cast<std::size_t>(count) * row_bytes);
    out[name] = std::move(part);
  }
  return out;
}

column_set in_order_sampler::batch_at(std::int64_t step) const {
  const std::int64_t n = table_.empty() ? 0 : table_.begin()->second.shape()[0];
  if (n == 0) return {};  // nothing to draw from (the loaders refuse empty sets)
  const std::int64_t lo = (step * batch_) % n;
  if (lo + batch_ <= n) return rows_of(table_, lo, batch_);
  // wraps round the end: the tail, then whole passes and a head as needed
  column_set out;
  for (const auto& [name, t] : table_) {
    std::vector<std::int64_t> dims = t.shape().dims();
    dims[0] = batch_;
    out[name] = tensor::empty(shape(dims), t.type());
  }
  for (std::int64_t done = 0, at = lo; done < batch_;) {
    const std::int64_t take = std::min(batch_ - done, n - at);
    for (const auto& [name, t] : table_) {
      const std::size_t row_bytes = static_cast<std::size_t>(t.numel() / n) * size_of(t.type());
      std::memcpy(out[name].data<std::byte>() + static_cast<std::size_t>(done) * row_bytes,
                  t.data<std::byte>() + static_cast<std::size_t>(at) * row_bytes,
                  static_cast<std::size_t>(take) * row_bytes);
    }
    done += take;
    at = (at + take) % n;
  }
  return out;
}

window_sampler::window_sampler(const std::vector<std::uint8_t>& bytes, std::int64_t batch, std::int64_t seq,
                               std::uint64_t seed)
    : bytes_(bytes), batch_(batch), seq_(seq), seed_(seed), draw_(seed) {}

std::map<std::string, tensor> window_sampler::batch_at(std::int64_t step) {
  if (step < next_step_) {
    draw_ = rng(seed_);
    next_step_ = 0;
  }
  const auto starts = static_cast<std::uint64_t>(static_cast<std::int64_t>(bytes_.size()) - seq_ - 1);
  tensor tokens = tensor::empty({batch_, seq_}, dtype::i32), targets = tensor::empty({batch_, seq_}, dtype::i32);
  while (next_step_ <= step) {
    for (std::int64_t b = 0; b < batch_; ++b) {
      auto at = static_cast<std::int64_t>(draw_.below(starts));
      if (next_step_ != step) continue;
      for (std::int64_t t = 0; t < seq_; ++t) {
        tokens.data<std::int32_t>()[b * seq_ + t] = bytes_[static_cast<std::size_t>(at + t)];
        targets.data<std::int32_t>()[b * seq_ + t] = bytes_[static_cast<std::size_t>(at + t + 1)];
      }
    }
    ++next_step_;
  }
  return {{"tokens", tokens}, {"targets", targets}};
}

}  // namespace cohort::apps
