// Reference kernels of the recommender ops: pooled embedding lookup (embedding_bag) and its
// gradient, DLRM's pairwise-dot interaction and its gradient, and binary cross-entropy on
// logits. Plain loops accumulating in double, as every reference kernel.
#include <cmath>
#include <string>

#include "kernels/reference/reference.hpp"

namespace cohort::kernels::ref {
namespace {

// An id of a bag: a row of the table, or the padding id (skipped).
status check_bag_id(std::int32_t id, std::int64_t vocab, std::int64_t pos) {
  if (id == bag_padding || (id >= 0 && id < vocab)) return {};
  return make_error(errc::invalid_argument, "embedding_bag: id " + std::to_string(id) + " at position " +
                                                std::to_string(pos) + " is outside [0," + std::to_string(vocab) +
                                                ") (and is not the padding id -1)");
}

// The divisor of a bag: 1 for a sum; for a mean, how many of its ids are not padding.
double bag_divisor(const std::int32_t* ids, std::int64_t length, bool mean) {
  if (!mean) return 1.0;
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < length; ++l) n += ids[l] != bag_padding ? 1 : 0;
  return static_cast<double>(n);
}

// log(1 + exp(-|z|)) + max(z, 0) - z y: the loss of one logit, stable for any z.
double bce_term(double z, double y) { return std::log1p(std::exp(-std::fabs(z))) + std::max(z, 0.0) - z * y; }

}  // namespace

status embedding_bag(const kernel_call& c) {
  const auto& attrs = std::get<bag_attrs>(c.op.attrs);
  const bool mean = attrs.mean;
  // a row shard holds rows [first, first + local); ids of other shards add nothing here
  const std::int64_t local = c.in[0].shape()[0], dim = c.in[0].shape()[1];
  const std::int64_t first = attrs.all_rows > 0 ? attrs.first_row : 0;
  const std::int64_t vocab = attrs.all_rows > 0 ? attrs.all_rows : local;
  const std::int64_t length = c.in[1].shape().at(-1), bags = length > 0 ? c.in[1].numel() / length : 0;
  const float* table = c.in[0].data<float>();
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  float* y = c.out[0].data<float>();
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int32_t* bag = ids + b * length;
    for (std::int64_t l = 0; l < length; ++l)
      if (auto st = check_bag_id(bag[l], vocab, b * length + l); !st) return st;
    const double divisor = bag_divisor(bag, length, mean);
    for (std::int64_t j = 0; j < dim; ++j) {
      double s = 0;
      for (std::int64_t l = 0; l < length; ++l)
        if (bag[l] != bag_padding && bag[l] >= first && bag[l] < first + local) s += table[(bag[l] - first) * dim + j];
      y[b * dim + j] = divisor > 0 ? static_cast<float>(s / divisor) : 0.f;
    }
  }
  if (bags == 0)
    for (std::int64_t i = 0; i < c.out[0].numel(); ++i) y[i] = 0.f;
  return {};
}

status embedding_bag_grad(const kernel_call& c) {
  const bool mean = std::get<bag_attrs>(c.op.attrs).mean;
  tensor& dtable = c.out[0];
  const std::int64_t vocab = dtable.shape()[0], dim = dtable.shape()[1];
  const std::int64_t length = c.in[1].shape().at(-1), bags = length > 0 ? c.in[1].numel() / length : 0;
  const float* dy = c.in[0].data<float>();
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  float* dt = dtable.data<float>();
  for (std::int64_t i = 0; i < dtable.numel(); ++i) dt[i] = 0.f;
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int32_t* bag = ids + b * length;
    for (std::int64_t l = 0; l < length; ++l)
      if (auto st = check_bag_id(bag[l], vocab, b * length + l); !st) return st;
    const double divisor = bag_divisor(bag, length, mean);
    for (std::int64_t l = 0; l < length; ++l) {
      if (bag[l] == bag_padding) continue;
      for (std::int64_t j = 0; j < dim; ++j)
        dt[bag[l] * dim + j] = static_cast<float>(dt[bag[l] * dim + j] + dy[b * dim + j] / divisor);
    }
  }
  return {};
}

status embedding_bag_sparse_grad(const kernel_call& c) {
  const bool mean = std::get<bag_attrs>(c.op.attrs).mean;
  const std::int64_t vocab = std::get<bag_attrs>(c.op.attrs).table[0], dim = c.out[1].shape()[1];
  const std::int64_t length = c.in[1].shape().at(-1), bags = length > 0 ? c.in[1].numel() / length : 0;
  const float* dy = c.in[0].data<float>();
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  std::int32_t* rows = c.out[0].data<std::int32_t>();
  float* values = c.out[1].data<float>();
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int32_t* bag = ids + b * length;
    for (std::int64_t l = 0; l < length; ++l)
      if (auto st = check_bag_id(bag[l], vocab, b * length + l); !st) return st;
    // the share as the fast dense kernel adds it: dy, or the float quotient dy / count
    const float count = mean ? static_cast<float>(bag_divisor(bag, length, true)) : 1.f;
    for (std::int64_t l = 0; l < length; ++l) {
      const std::int64_t i = b * length + l;
      rows[i] = bag[l];
      for (std::int64_t j = 0; j < dim; ++j)
        values[i * dim + j] = bag[l] == bag_padding ? 0.f : (mean ? dy[b * dim + j] / count : dy[b * dim + j]);
    }
  }
  return {};
}

status pairwise_dot(const kernel_call& c) {
  const tensor& x = c.in[0];
  const std::int64_t f = x.shape().at(-2), d = x.shape().at(-1), pairs = f * (f - 1) / 2;
  const std::int64_t rows = x.numel() / (f * d);
  const float* xs = x.data<float>();
  float* y = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* m = xs + r * f * d;
    std::int64_t p = 0;
    for (std::int64_t i = 1; i < f; ++i)
      for (std::int64_t j = 0; j < i; ++j, ++p) {
        double s = 0;
        for (std::int64_t k = 0; k < d; ++k) s += static_cast<double>(m[i * d + k]) * m[j * d + k];
        y[r * pairs + p] = static_cast<float>(s);
      }
  }
  return {};
}

status pairwise_dot_grad(const kernel_call& c) {  // dx_i = sum_j dy_ij x_j over every pair holding i
  const tensor& x = c.in[1];
  const std::int64_t f = x.shape().at(-2), d = x.shape().at(-1), pairs = f * (f - 1) / 2;
  const std::int64_t rows = x.numel() / (f * d);
  const float* dy = c.in[0].data<float>();
  const float* xs = x.data<float>();
  float* dx = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* m = xs + r * f * d;
    const float* g = dy + r * pairs;
    for (std::int64_t a = 0; a < f; ++a)
      for (std::int64_t k = 0; k < d; ++k) {
        double s = 0;
        for (std::int64_t b = 0; b < f; ++b) {
          if (b == a) continue;
          const std::int64_t i = std::max(a, b), j = std::min(a, b);
          s += static_cast<double>(g[i * (i - 1) / 2 + j]) * m[b * d + k];
        }
        dx[r * f * d + a * d + k] = static_cast<float>(s);
      }
  }
  return {};
}

status bce_with_logits(const kernel_call& c) {
  const std::int64_t n = c.in[0].numel();
  const float* z = c.in[0].data<float>();
  const float* y = c.in[1].data<float>();
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) total += bce_term(z[i], y[i]);
  c.out[0].data<float>()[0] = static_cast<float>(n > 0 ? total / static_cast<double>(n) : 0.0);
  return {};
}

status bce_with_logits_grad(const kernel_call& c) {  // (sigmoid(z) - y) * dloss / n
  const std::int64_t n = c.in[1].numel();
  const double dl = c.in[0].data<float>()[0];
  const float* z = c.in[1].data<float>();
  const float* y = c.in[2].data<float>();
  float* dz = c.out[0].data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(z[i])));
    dz[i] = static_cast<float>((p - y[i]) * dl / static_cast<double>(n));
  }
  return {};
}

}  // namespace cohort::kernels::ref
