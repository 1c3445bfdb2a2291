// Reference elementwise kernels: broadcasting arithmetic, activations and their gradients.
#include <cmath>
#include <numbers>

#include "kernels/detail/broadcast.hpp"
#include "kernels/reference/reference.hpp"

namespace cohort::kernels::ref {
namespace {

template <class F>
status binary(const kernel_call& c, F f) {
  const tensor& a = c.in[0];
  const tensor& b = c.in[1];
  tensor& y = c.out[0];
  auto sa = detail::broadcast_strides(a.shape(), y.shape());
  auto sb = detail::broadcast_strides(b.shape(), y.shape());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
  for (std::int64_t i = 0, n = y.numel(); i < n; ++i)
    py[i] = f(pa[detail::broadcast_offset(y.shape(), sa, i)], pb[detail::broadcast_offset(y.shape(), sb, i)]);
  return {};
}

template <class F>
status unary(const kernel_call& c, F f) {
  const float* x = c.in[0].data<float>();
  float* y = c.out[0].data<float>();
  for (std::int64_t i = 0, n = c.out[0].numel(); i < n; ++i) y[i] = f(x[i]);
  return {};
}

// (dy, z) -> dx elementwise.
template <class F>
status unary_grad(const kernel_call& c, F f) {
  const float* dy = c.in[0].data<float>();
  const float* z = c.in[1].data<float>();
  float* dx = c.out[0].data<float>();
  for (std::int64_t i = 0, n = c.out[0].numel(); i < n; ++i) dx[i] = f(dy[i], z[i]);
  return {};
}

double gelu_of(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }

double gelu_derivative(double x) {
  double cdf = 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
  return cdf + x * pdf;
}

}  // namespace

status add(const kernel_call& c) {
  return binary(c, [](float a, float b) { return a + b; });
}
status sub(const kernel_call& c) {
  return binary(c, [](float a, float b) { return a - b; });
}
status mul(const kernel_call& c) {
  return binary(c, [](float a, float b) { return a * b; });
}
status div(const kernel_call& c) {
  return binary(c, [](float a, float b) { return a / b; });
}

status bias_add(const kernel_call& c) {
  const float* x = c.in[0].data<float>();
  const float* b = c.in[1].data<float>();
  float* y = c.out[0].data<float>();
  auto [rows, cols] = detail::as_rows(c.in[0].shape());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) y[r * cols + j] = x[r * cols + j] + b[j];
  return {};
}

status scale(const kernel_call& c) {
  float f = std::get<scale_attrs>(c.op.attrs).factor;
  return unary(c, [f](float x) { return x * f; });
}

status relu(const kernel_call& c) {
  return unary(c, [](float x) { return x > 0.f ? x : 0.f; });
}
status gelu(const kernel_call& c) {
  return unary(c, [](float x) { return static_cast<float>(gelu_of(x)); });
}
status tanh(const kernel_call& c) {
  return unary(c, [](float x) { return std::tanh(x); });
}

status relu_grad(const kernel_call& c) {
  return unary_grad(c, [](float dy, float x) { return x > 0.f ? dy : 0.f; });
}
status gelu_grad(const kernel_call& c) {
  return unary_grad(c, [](float dy, float x) { return static_cast<float>(dy * gelu_derivative(x)); });
}
status tanh_grad(const kernel_call& c) {
  return unary_grad(c, [](float dy, float y) { return dy * (1.f - y * y); });
}

}  // namespace cohort::kernels::ref
