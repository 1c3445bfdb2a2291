// Reference softmax family over the last axis: softmax, log-softmax, fused cross-entropy,
// and their gradients.
#include <cmath>
#include <string>

#include "kernels/detail/broadcast.hpp"
#include "kernels/reference/reference.hpp"

namespace cohort::kernels::ref {
namespace {

// log(sum(exp(row))) computed stably.
double log_sum_exp(const float* row, std::int64_t n) {
  double mx = -INFINITY;
  for (std::int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(row[j]));
  if (std::isinf(mx) && mx < 0) return mx;
  double s = 0;
  for (std::int64_t j = 0; j < n; ++j) s += std::exp(row[j] - mx);
  return mx + std::log(s);
}

status check_label(std::int32_t label, std::int64_t classes, std::int64_t row) {
  if (label < 0 || label >= classes)
    return make_error(errc::invalid_argument, "softmax_cross_entropy: label " + std::to_string(label) + " in row " +
                                                  std::to_string(row) + " is outside [0," + std::to_string(classes) +
                                                  ")");
  return {};
}

}  // namespace

status softmax(const kernel_call& c) {
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* x = c.in[0].data<float>();
  float* y = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    double lse = log_sum_exp(x + r * cols, cols);
    for (std::int64_t j = 0; j < cols; ++j) y[r * cols + j] = static_cast<float>(std::exp(x[r * cols + j] - lse));
  }
  return {};
}

status log_softmax(const kernel_call& c) {
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* x = c.in[0].data<float>();
  float* y = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    double lse = log_sum_exp(x + r * cols, cols);
    for (std::int64_t j = 0; j < cols; ++j) y[r * cols + j] = static_cast<float>(x[r * cols + j] - lse);
  }
  return {};
}

status softmax_grad(const kernel_call& c) {  // dx = y * (dy - sum(dy * y))
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* dy = c.in[0].data<float>();
  const float* y = c.in[1].data<float>();
  float* dx = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (std::int64_t j = 0; j < cols; ++j) dot += static_cast<double>(dy[r * cols + j]) * y[r * cols + j];
    for (std::int64_t j = 0; j < cols; ++j)
      dx[r * cols + j] = static_cast<float>(y[r * cols + j] * (dy[r * cols + j] - dot));
  }
  return {};
}

status log_softmax_grad(const kernel_call& c) {  // dx = dy - exp(y) * sum(dy)
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* dy = c.in[0].data<float>();
  const float* y = c.in[1].data<float>();
  float* dx = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::int64_t j = 0; j < cols; ++j) s += dy[r * cols + j];
    for (std::int64_t j = 0; j < cols; ++j)
      dx[r * cols + j] = static_cast<float>(dy[r * cols + j] - std::exp(static_cast<double>(y[r * cols + j])) * s);
  }
  return {};
}

status softmax_cross_entropy(const kernel_call& c) {
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* x = c.in[0].data<float>();
  const std::int32_t* labels = c.in[1].data<std::int32_t>();
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (auto st = check_label(labels[r], cols, r); !st) return st;
    total += log_sum_exp(x + r * cols, cols) - x[r * cols + labels[r]];
  }
  c.out[0].data<float>()[0] = static_cast<float>(rows > 0 ? total / static_cast<double>(rows) : 0.0);
  return {};
}

status softmax_cross_entropy_grad(const kernel_call& c) {  // (p - onehot) * dloss / rows
  auto [rows, cols] = detail::as_rows(c.in[1].shape());
  double dl = c.in[0].data<float>()[0];
  const float* x = c.in[1].data<float>();
  const std::int32_t* labels = c.in[2].data<std::int32_t>();
  float* dx = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (auto st = check_label(labels[r], cols, r); !st) return st;
    double lse = log_sum_exp(x + r * cols, cols);
    for (std::int64_t j = 0; j < cols; ++j) {
      double p = std::exp(x[r * cols + j] - lse) - (j == labels[r] ? 1.0 : 0.0);
      dx[r * cols + j] = static_cast<float>(p * dl / static_cast<double>(rows));
    }
  }
  return {};
}

}  // namespace cohort::kernels::ref
