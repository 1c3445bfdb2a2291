// Fast layer normalization over the last axis, forward and backward, float accumulators
// with a two-pass variance. The backward pass accumulates dgamma/dbeta row by row on the
// calling thread (they are summed over all rows, so splitting rows would need scratch).
#include <cmath>

#include "kernels/cpu/cpu.hpp"
#include "kernels/detail/broadcast.hpp"
#include "kernels/thread_pool.hpp"

namespace cohort::kernels::cpu {
namespace {

struct moments {
  float mean, rstd;
};

moments row_moments(const float* x, std::int64_t n, float eps) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < n; ++j) s += x[j];
  float mean = s / static_cast<float>(n);
  float v = 0.f;
#pragma omp simd reduction(+ : v)
  for (std::int64_t j = 0; j < n; ++j) v += (x[j] - mean) * (x[j] - mean);
  return {mean, 1.f / std::sqrt(v / static_cast<float>(n) + eps)};
}

}  // namespace

status layernorm(const kernel_call& c) {
  float eps = std::get<layernorm_attrs>(c.op.attrs).eps;
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* x = c.in[0].data<float>();
  const float* gamma = c.in[1].data<float>();
  const float* beta = c.in[2].data<float>();
  float* y = c.out[0].data<float>();
  auto body = [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      auto m = row_moments(xr, cols, eps);
      for (std::int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m.mean) * m.rstd * gamma[j] + beta[j];
    }
  };
  if (c.pool != nullptr)
    c.pool->parallel_for(rows, 64, body);
  else
    body(0, rows);
  return {};
}

status layernorm_grad(const kernel_call& c) {
  float eps = std::get<layernorm_attrs>(c.op.attrs).eps;
  auto [rows, cols] = detail::as_rows(c.in[1].shape());
  const float* dy = c.in[0].data<float>();
  const float* x = c.in[1].data<float>();
  const float* gamma = c.in[2].data<float>();
  float* dx = c.out[0].data<float>();
  float* dgamma = c.out[1].data<float>();
  float* dbeta = c.out[2].data<float>();
  for (std::int64_t j = 0; j < cols; ++j) dgamma[j] = dbeta[j] = 0.f;
  const float inv_n = 1.f / static_cast<float>(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    auto m = row_moments(xr, cols, eps);
    float sum_d = 0.f, sum_dx = 0.f;
#pragma omp simd reduction(+ : sum_d, sum_dx)
    for (std::int64_t j = 0; j < cols; ++j) {
      float xhat = (xr[j] - m.mean) * m.rstd;
      float d = dyr[j] * gamma[j];
      sum_d += d;
      sum_dx += d * xhat;
      dgamma[j] += dyr[j] * xhat;
      dbeta[j] += dyr[j];
    }
    float mean_d = sum_d * inv_n, mean_dx = sum_dx * inv_n;
    for (std::int64_t j = 0; j < cols; ++j) {
      float xhat = (xr[j] - m.mean) * m.rstd;
      dxr[j] = m.rstd * (dyr[j] * gamma[j] - mean_d - xhat * mean_dx);
    }
  }
  return {};
}

}  // namespace cohort::kernels::cpu
