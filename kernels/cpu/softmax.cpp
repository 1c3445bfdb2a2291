// Fast softmax family: one pass per row for the maximum, one for exp and sum, one to
// scale; rows split across the kernel pool.
#include <cmath>
#include <string>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/vec_math.hpp"
#include "kernels/detail/broadcast.hpp"
#include "kernels/thread_pool.hpp"

namespace cohort::kernels::cpu {
namespace {

constexpr std::int64_t row_grain_elems = 1 << 14;

template <class F>
void for_rows(const kernel_call& c, std::int64_t rows, std::int64_t cols, F&& body) {
  std::int64_t grain = std::max<std::int64_t>(1, row_grain_elems / std::max<std::int64_t>(cols, 1));
  if (c.pool != nullptr)
    c.pool->parallel_for(rows, grain, body);
  else
    body(0, rows);
}

float row_max(const float* x, std::int64_t n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (std::int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// Writes exp(x - max) into y and returns the sum.
float exp_shifted(const float* x, float* y, std::int64_t n, float max) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < n; ++j) {
    y[j] = fast_exp(x[j] - max);
    s += y[j];
  }
  return s;
}

// log(sum(exp(x))) of one row, without writing anything.
float log_sum_exp(const float* x, std::int64_t n) {
  float m = row_max(x, n);
  if (std::isinf(m) && m < 0) return m;
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < n; ++j) s += fast_exp(x[j] - m);
  return m + std::log(s);
}

status bad_label(std::int32_t label, std::int64_t classes, std::int64_t row) {
  return make_error(errc::invalid_argument, "softmax_cross_entropy: label " + std::to_string(label) + " in row " +
                                                std::to_string(row) + " is outside [0," + std::to_string(classes) +
                                                ")");
}

}  // namespace

status softmax(const kernel_call& c) {
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* x = c.in[0].data<float>();
  float* y = c.out[0].data<float>();
  for_rows(c, rows, cols, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      float inv = 1.f / exp_shifted(xr, yr, cols, row_max(xr, cols));
      for (std::int64_t j = 0; j < cols; ++j) yr[j] *= inv;
    }
  });
  return {};
}

status softmax_grad(const kernel_call& c) {
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* dy = c.in[0].data<float>();
  const float* y = c.in[1].data<float>();
  float* dx = c.out[0].data<float>();
  for_rows(c, rows, cols, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const float* dyr = dy + r * cols;
      const float* yr = y + r * cols;
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (std::int64_t j = 0; j < cols; ++j) dot += dyr[j] * yr[j];
      for (std::int64_t j = 0; j < cols; ++j) dx[r * cols + j] = yr[j] * (dyr[j] - dot);
    }
  });
  return {};
}

status softmax_cross_entropy(const kernel_call& c) {
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* x = c.in[0].data<float>();
  const std::int32_t* labels = c.in[1].data<std::int32_t>();
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int32_t l = labels[r];
    if (l < 0 || l >= cols) return bad_label(l, cols, r);
    total += static_cast<double>(log_sum_exp(x + r * cols, cols)) - x[r * cols + l];
  }
  c.out[0].data<float>()[0] = static_cast<float>(rows > 0 ? total / static_cast<double>(rows) : 0.0);
  return {};
}

status softmax_cross_entropy_grad(const kernel_call& c) {
  auto [rows, cols] = detail::as_rows(c.in[1].shape());
  const float dl = c.in[0].data<float>()[0];
  const float* x = c.in[1].data<float>();
  const std::int32_t* labels = c.in[2].data<std::int32_t>();
  float* dx = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r)
    if (labels[r] < 0 || labels[r] >= cols) return bad_label(labels[r], cols, r);
  const float row_scale = rows > 0 ? dl / static_cast<float>(rows) : 0.f;
  for_rows(c, rows, cols, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * cols;
      float* dr = dx + r * cols;
      float inv = row_scale / exp_shifted(xr, dr, cols, row_max(xr, cols));
      for (std::int64_t j = 0; j < cols; ++j) dr[j] *= inv;
      dr[labels[r]] -= row_scale;
    }
  });
  return {};
}

status causal_mask(const kernel_call& c) {
  float fill = std::get<causal_mask_attrs>(c.op.attrs).fill;
  std::int64_t t = c.in[0].shape().at(-1);
  std::int64_t rows = c.in[0].numel() / std::max<std::int64_t>(t, 1);
  const float* x = c.in[0].data<float>();
  float* y = c.out[0].data<float>();
  for_rows(c, rows, t, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      std::int64_t i = r % t;  // row index inside its [T,T] matrix
      for (std::int64_t j = 0; j < t; ++j) y[r * t + j] = j > i ? fill : x[r * t + j];
    }
  });
  return {};
}

}  // namespace cohort::kernels::cpu
