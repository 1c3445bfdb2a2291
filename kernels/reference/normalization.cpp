// Reference layer normalization and mean-squared error, with gradients.
#include <cmath>

#include "kernels/detail/broadcast.hpp"
#include "kernels/reference/reference.hpp"

namespace cohort::kernels::ref {
namespace {

struct moments {
  double mean, rstd;
};

moments row_moments(const float* x, std::int64_t n, float eps) {
  double mean = 0;
  for (std::int64_t j = 0; j < n; ++j) mean += x[j];
  mean /= static_cast<double>(n);
  double var = 0;
  for (std::int64_t j = 0; j < n; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= static_cast<double>(n);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

}  // namespace

status layernorm(const kernel_call& c) {
  float eps = std::get<layernorm_attrs>(c.op.attrs).eps;
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  const float* x = c.in[0].data<float>();
  const float* gamma = c.in[1].data<float>();
  const float* beta = c.in[2].data<float>();
  float* y = c.out[0].data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    auto m = row_moments(x + r * cols, cols, eps);
    for (std::int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = static_cast<float>((x[r * cols + j] - m.mean) * m.rstd * gamma[j] + beta[j]);
  }
  return {};
}

status layernorm_grad(const kernel_call& c) {
  // xhat = (x - mean) * rstd;  dxhat = dy * gamma
  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
  float eps = std::get<layernorm_attrs>(c.op.attrs).eps;
  auto [rows, cols] = detail::as_rows(c.in[1].shape());
  const float* dy = c.in[0].data<float>();
  const float* x = c.in[1].data<float>();
  const float* gamma = c.in[2].data<float>();
  float* dx = c.out[0].data<float>();
  float* dgamma = c.out[1].data<float>();
  float* dbeta = c.out[2].data<float>();
  for (std::int64_t j = 0; j < cols; ++j) dgamma[j] = dbeta[j] = 0.f;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    auto m = row_moments(xr, cols, eps);
    double mean_d = 0, mean_dx = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - m.mean) * m.rstd;
      double d = static_cast<double>(dyr[j]) * gamma[j];
      mean_d += d;
      mean_dx += d * xhat;
      dgamma[j] += static_cast<float>(dyr[j] * xhat);
      dbeta[j] += dyr[j];
    }
    mean_d /= static_cast<double>(cols);
    mean_dx /= static_cast<double>(cols);
    for (std::int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - m.mean) * m.rstd;
      double d = static_cast<double>(dyr[j]) * gamma[j];
      dx[r * cols + j] = static_cast<float>(m.rstd * (d - mean_d - xhat * mean_dx));
    }
  }
  return {};
}

status mse(const kernel_call& c) {
  const float* a = c.in[0].data<float>();
  const float* b = c.in[1].data<float>();
  std::int64_t n = c.in[0].numel();
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  c.out[0].data<float>()[0] = static_cast<float>(n > 0 ? s / static_cast<double>(n) : 0.0);
  return {};
}

status mse_grad(const kernel_call& c) {  // 2 (a - b) dloss / n
  double dl = c.in[0].data<float>()[0];
  const float* a = c.in[1].data<float>();
  const float* b = c.in[2].data<float>();
  float* dx = c.out[0].data<float>();
  std::int64_t n = c.in[1].numel();
  for (std::int64_t i = 0; i < n; ++i)
    dx[i] = static_cast<float>(2.0 * (static_cast<double>(a[i]) - b[i]) * dl / static_cast<double>(n));
  return {};
}

}  // namespace cohort::kernels::ref
