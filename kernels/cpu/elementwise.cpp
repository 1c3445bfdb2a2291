// Fast elementwise kernels: contiguous loops the compiler vectorizes, split across the
// kernel pool for large tensors. Broadcasting binary ops have fast paths for equal shapes,
// a scalar operand, and a row vector repeated over leading axes; other patterns use the
// reference kernel.
#include <numbers>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/vec_math.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/thread_pool.hpp"

namespace cohort::kernels::cpu {
namespace {

constexpr std::int64_t elementwise_grain = 1 << 15;

template <class F>
void parallel(const kernel_call& c, std::int64_t n, F&& body) {
  if (c.pool != nullptr)
    c.pool->parallel_for(n, elementwise_grain, body);
  else
    body(0, n);
}

// Which fast path fits b against the output: same shape, scalar, or a row repeated.
enum class pattern { same, scalar, row, other };

pattern classify(const shape& operand, const shape& out) {
  if (operand == out) return pattern::same;
  if (operand.numel() == 1) return pattern::scalar;
  // operand's shape, ignoring leading 1s, equals the trailing axes of out.
  int lead = 0;
  while (lead < operand.rank() && operand[lead] == 1) ++lead;
  int k = operand.rank() - lead;
  if (k > out.rank()) return pattern::other;
  for (int i = 0; i < k; ++i)
    if (operand[lead + i] != out[out.rank() - k + i]) return pattern::other;
  return pattern::row;
}

template <class F>
status binary(const kernel_call& c, F f, status (*fallback)(const kernel_call&)) {
  const tensor& a = c.in[0];
  const tensor& b = c.in[1];
  tensor& y = c.out[0];
  if (a.shape() != y.shape()) return fallback(c);
  pattern pb = classify(b.shape(), y.shape());
  const float* pa = a.data<float>();
  const float* pbv = b.data<float>();
  float* py = y.data<float>();
  std::int64_t n = y.numel();
  switch (pb) {
    case pattern::same:
      parallel(c, n, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) py[i] = f(pa[i], pbv[i]);
      });
      return {};
    case pattern::scalar: {
      float s = pbv[0];
      parallel(c, n, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) py[i] = f(pa[i], s);
      });
      return {};
    }
    case pattern::row: {
      std::int64_t cols = b.numel();
      std::int64_t rows = n / cols;
      parallel(c, rows, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t r = lo; r < hi; ++r)
          for (std::int64_t j = 0; j < cols; ++j) py[r * cols + j] = f(pa[r * cols + j], pbv[j]);
      });
      return {};
    }
    case pattern::other:
      break;
  }
  return fallback(c);
}

template <class F>
status unary(const kernel_call& c, F f) {
  const float* x = c.in[0].data<float>();
  float* y = c.out[0].data<float>();
  parallel(c, c.out[0].numel(), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
  });
  return {};
}

template <class F>
status unary_grad(const kernel_call& c, F f) {
  const float* dy = c.in[0].data<float>();
  const float* z = c.in[1].data<float>();
  float* dx = c.out[0].data<float>();
  parallel(c, c.out[0].numel(), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) dx[i] = f(dy[i], z[i]);
  });
  return {};
}

constexpr float inv_sqrt2 = 0.70710678118654752f;
constexpr float inv_sqrt_2pi = 0.39894228040143268f;

}  // namespace

status add(const kernel_call& c) {
  return binary(
      c, [](float a, float b) { return a + b; }, ref::add);
}
status sub(const kernel_call& c) {
  return binary(
      c, [](float a, float b) { return a - b; }, ref::sub);
}
status mul(const kernel_call& c) {
  return binary(
      c, [](float a, float b) { return a * b; }, ref::mul);
}
status div(const kernel_call& c) {
  return binary(
      c, [](float a, float b) { return a / b; }, ref::div);
}

status bias_add(const kernel_call& c) {
  return binary(
      c, [](float a, float b) { return a + b; }, ref::bias_add);
}

status scale(const kernel_call& c) {
  float f = std::get<scale_attrs>(c.op.attrs).factor;
  return unary(c, [f](float x) { return x * f; });
}

status relu(const kernel_call& c) {
  return unary(c, [](float x) { return x > 0.f ? x : 0.f; });
}

status relu_grad(const kernel_call& c) {
  return unary_grad(c, [](float dy, float x) { return x > 0.f ? dy : 0.f; });
}

status gelu(const kernel_call& c) {
  return unary(c, [](float x) { return 0.5f * x * (1.f + fast_erf(x * inv_sqrt2)); });
}

status gelu_grad(const kernel_call& c) {
  return unary_grad(c, [](float dy, float x) {
    float cdf = 0.5f * (1.f + fast_erf(x * inv_sqrt2));
    float pdf = fast_exp(-0.5f * x * x) * inv_sqrt_2pi;
    return dy * (cdf + x * pdf);
  });
}

}  // namespace cohort::kernels::cpu
