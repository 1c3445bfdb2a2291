// SGD and AdamW updates.
#include "kernels/optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace cohort::kernels {
namespace {

// The loops read the configuration into locals and take restrict pointers: otherwise a store
// through a float pointer may alias the config's floats and the compiler reloads them every
// element instead of vectorizing (the update was 20 % of a dp2 mlp step before).
// `buf`: the momentum buffer (null without momentum), `step`: the updates before this one.
void sgd(float* __restrict p, const float* __restrict g, float* __restrict buf, std::int64_t n, std::int64_t step,
         const sgd_config& c) {
  const float lr = c.lr, decay = c.weight_decay, momentum = c.momentum;
  if (buf == nullptr) {
    for (std::int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + decay * p[i]);
    return;
  }
  // one pass per case: the update is bound by memory traffic, not arithmetic
  const bool first = step == 0;
  if (c.nesterov) {
    for (std::int64_t i = 0; i < n; ++i) {
      const float d = g[i] + decay * p[i];
      const float b = first ? d : momentum * buf[i] + d;
      buf[i] = b;
      p[i] -= lr * (d + momentum * b);
    }
  } else if (first) {
    for (std::int64_t i = 0; i < n; ++i) {
      const float d = g[i] + decay * p[i];
      buf[i] = d;
      p[i] -= lr * d;
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      const float b = momentum * buf[i] + (g[i] + decay * p[i]);
      buf[i] = b;
      p[i] -= lr * b;
    }
  }
}

void adamw(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, std::int64_t n,
           std::int64_t step, const adamw_config& c) {
  const double t = static_cast<double>(step + 1);
  const float decay = static_cast<float>(1.0 - static_cast<double>(c.lr) * c.weight_decay);
  const float step_size = static_cast<float>(c.lr / (1.0 - std::pow(static_cast<double>(c.beta1), t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(c.beta2), t)));
  const float beta1 = c.beta1, beta2 = c.beta2, eps = c.eps;
  const float one_minus_b1 = 1.f - beta1, one_minus_b2 = 1.f - beta2;
  for (std::int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = m[i] * beta1 + g[i] * one_minus_b1;
    v[i] = v[i] * beta2 + g[i] * g[i] * one_minus_b2;
    float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    p[i] += -step_size * (m[i] / denom);
  }
}

// torch's _single_tensor_adagrad: state_sum.addcmul_(g, g); std = state_sum.sqrt() + eps;
// p.addcdiv_(g, std, -lr).
void adagrad(float* __restrict p, const float* __restrict g, float* __restrict sum, std::int64_t n,
             const adagrad_config& c) {
  const float lr = c.lr, eps = c.eps;
  for (std::int64_t i = 0; i < n; ++i) {
    sum[i] += g[i] * g[i];
    p[i] -= lr * (g[i] / (std::sqrt(sum[i]) + eps));
  }
}

}  // namespace

optimizer_state make_state(const tensor& param, const optimizer_config& cfg) {
  optimizer_state st;
  for (int i = 0; i < state_slots(cfg); ++i) st.slots.push_back(tensor::zeros(param.shape()));
  return st;
}

namespace {

// One rule on elements [begin, end): the state's slots are read at the same offsets (no
// view of them made: this runs per dense run per step).
void update_span(float* p, const float* g, std::int64_t begin, std::int64_t end, optimizer_state& state,
                 const optimizer_config& cfg) {
  const std::int64_t n = end - begin;
  auto slot = [&](std::size_t i) { return i < state.slots.size() ? state.slots[i].data<float>() + begin : nullptr; };
  if (const auto* s = std::get_if<sgd_config>(&cfg))
    sgd(p + begin, g + begin, slot(0), n, state.step, *s);
  else if (const auto* a = std::get_if<adagrad_config>(&cfg))
    adagrad(p + begin, g + begin, slot(0), n, *a);
  else
    adamw(p + begin, g + begin, slot(0), slot(1), n, state.step, std::get<adamw_config>(cfg));
}

}  // namespace

void apply_update(tensor& param, const tensor& grad, optimizer_state& state, const optimizer_config& cfg) {
  update_span(param.data<float>(), grad.data<float>(), 0, param.numel(), state, cfg);
  ++state.step;
}

void apply_update_runs(tensor& param, const tensor& grad, optimizer_state& state, const optimizer_config& cfg,
                       const std::vector<range>& runs) {
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  for (const range& r : runs)
    if (r.size() > 0) update_span(p, g, r.begin, r.end, state, cfg);
  ++state.step;
}

namespace {
constexpr std::int64_t prefetch_rows = 8;  // a table's touched rows are cache misses: ask ahead
}  // namespace

std::string sparse_update_problem(const optimizer_config& cfg) {
  if (std::holds_alternative<adagrad_config>(cfg)) return "";
  const auto* s = std::get_if<sgd_config>(&cfg);
  if (s == nullptr) return "AdamW moves every row each step (its moments decay)";
  if (s->momentum != 0.f) return "SGD with momentum moves rows its buffer remembers";
  if (s->weight_decay != 0.f) return "weight decay shrinks every row each step";
  return "";
}

row_sums::row_sums(std::int64_t entries, std::int64_t dim) : dim_(dim) {
  std::size_t capacity = 16;
  while (capacity < 2 * static_cast<std::size_t>(std::max<std::int64_t>(entries, 1))) capacity *= 2;
  keys_.assign(capacity, -1);
  slot_of_key_.assign(capacity, 0);
  rows_.assign(static_cast<std::size_t>(std::max<std::int64_t>(entries, 1)), -1);
  sums_.assign(rows_.size() * static_cast<std::size_t>(dim), 0.f);
}

void row_sums::gather(const std::int32_t* rows, const float* values, std::int64_t n) {
  clear();
  add(rows, values, n);
}

void row_sums::clear() {
  for (std::int64_t k = 0; k < distinct_; ++k) {  // forget the last step's rows only
    std::size_t h = static_cast<std::size_t>(rows_[static_cast<std::size_t>(k)]) * 0x9E3779B1u & (keys_.size() - 1);
    while (keys_[h] != -1) {
      keys_[h] = -1;
      h = (h + 1) & (keys_.size() - 1);
    }
  }
  distinct_ = 0;
}

void row_sums::add(const std::int32_t* rows, const float* values, std::int64_t n) {
  const std::size_t mask = keys_.size() - 1;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t r = rows[i];
    if (r < 0) continue;
    std::size_t h = static_cast<std::size_t>(r) * 0x9E3779B1u & mask;
    while (keys_[h] != -1 && keys_[h] != r) h = (h + 1) & mask;
    float* sum;
    const float* v = values + i * dim_;
    if (keys_[h] == -1) {
      keys_[h] = r;
      slot_of_key_[h] = static_cast<std::int32_t>(distinct_);
      rows_[static_cast<std::size_t>(distinct_)] = r;
      sum = sums_.data() + distinct_ * dim_;
      ++distinct_;
      for (std::int64_t j = 0; j < dim_; ++j) sum[j] = 0.f + v[j];  // as the dense kernel: zero, then add
    } else {
      sum = sums_.data() + static_cast<std::int64_t>(slot_of_key_[h]) * dim_;
      for (std::int64_t j = 0; j < dim_; ++j) sum[j] += v[j];
    }
  }
}

void row_sums::add_bags(const std::int32_t* ids, std::int64_t bags, std::int64_t length, const float* output_grad,
                        bool mean) {
  const std::size_t mask = keys_.size() - 1;
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int32_t* bag = ids + b * length;
    std::int64_t used = 0;
    if (mean)
      for (std::int64_t l = 0; l < length; ++l) used += bag[l] >= 0 ? 1 : 0;
    const float count = mean ? static_cast<float>(used) : 1.f;  // embedding_bag_sparse_grad's quotient
    const float* src = output_grad + b * dim_;
    for (std::int64_t l = 0; l < length; ++l) {
      const std::int32_t r = bag[l];
      if (r < 0) continue;
      std::size_t h = static_cast<std::size_t>(r) * 0x9E3779B1u & mask;
      while (keys_[h] != -1 && keys_[h] != r) h = (h + 1) & mask;
      if (keys_[h] == -1) {
        keys_[h] = r;
        slot_of_key_[h] = static_cast<std::int32_t>(distinct_);
        rows_[static_cast<std::size_t>(distinct_)] = r;
        float* __restrict sum = sums_.data() + distinct_ * dim_;
        ++distinct_;
        if (mean)
          for (std::int64_t j = 0; j < dim_; ++j) sum[j] = 0.f + src[j] / count;
        else
          for (std::int64_t j = 0; j < dim_; ++j) sum[j] = 0.f + src[j];
      } else {
        float* __restrict sum = sums_.data() + static_cast<std::int64_t>(slot_of_key_[h]) * dim_;
        if (mean)
          for (std::int64_t j = 0; j < dim_; ++j) sum[j] += src[j] / count;
        else
          for (std::int64_t j = 0; j < dim_; ++j) sum[j] += src[j];
      }
    }
  }
}

void apply_sparse_update(tensor& table, const row_sums& sums, optimizer_state& state, const optimizer_config& cfg) {
  const std::int64_t dim = table.shape()[1];
  float* p = table.data<float>();
  if (const auto* a = std::get_if<adagrad_config>(&cfg)) {
    float* sum = state.slots[0].data<float>();
    for (std::int64_t k = 0; k < sums.size(); ++k) {  // adagrad() on each touched row
      if (k + prefetch_rows < sums.size()) {
        const std::int64_t ahead = static_cast<std::int64_t>(sums.rows()[k + prefetch_rows]) * dim;
        __builtin_prefetch(p + ahead, 1);
        __builtin_prefetch(sum + ahead, 1);
      }
      const std::int64_t at = static_cast<std::int64_t>(sums.rows()[k]) * dim;
      adagrad(p + at, sums.sums() + k * dim, sum + at, dim, *a);
    }
    ++state.step;
    return;
  }
  const auto& s = std::get<sgd_config>(cfg);
  const float lr = s.lr, decay = s.weight_decay;
  for (std::int64_t k = 0; k < sums.size(); ++k) {
    if (k + prefetch_rows < sums.size())
      __builtin_prefetch(p + static_cast<std::int64_t>(sums.rows()[k + prefetch_rows]) * dim, 1);
    float* row = p + static_cast<std::int64_t>(sums.rows()[k]) * dim;
    const float* g = sums.sums() + k * dim;
    for (std::int64_t j = 0; j < dim; ++j) row[j] -= lr * (g[j] + decay * row[j]);  // sgd()'s formula
  }
  ++state.step;
}

void apply_sparse_rows(float* piece, std::int64_t piece_size, float* slot, std::int64_t table_offset,
                       std::int64_t first_row, std::int64_t rows, std::int64_t dim, const row_sums& sums,
                       const optimizer_config& cfg) {
  const auto* a = std::get_if<adagrad_config>(&cfg);
  const auto* s = std::get_if<sgd_config>(&cfg);
  for (std::int64_t k = 0; k < sums.size(); ++k) {
    const std::int64_t row = static_cast<std::int64_t>(sums.rows()[k]) - first_row;
    if (row < 0 || row >= rows) continue;  // another shard's row
    const std::int64_t row_begin = table_offset + row * dim;
    const std::int64_t begin = std::max<std::int64_t>(row_begin, 0);
    const std::int64_t end = std::min<std::int64_t>(row_begin + dim, piece_size);
    if (begin >= end) continue;  // a row of another piece
    const float* g = sums.sums() + k * dim + (begin - row_begin);
    if (a != nullptr) {
      adagrad(piece + begin, g, slot + begin, end - begin, *a);
    } else {
      const float lr = s->lr, decay = s->weight_decay;
      float* row = piece + begin;
      for (std::int64_t j = 0; j < end - begin; ++j) row[j] -= lr * (g[j] + decay * row[j]);  // sgd()'s formula
    }
  }
}

}  // namespace cohort::kernels
