// Fast reductions without scratch memory. sum_to and sum/mean handle the common layout
// (reduce the leading axes of a row-major tensor into its trailing ones) directly and
// accumulate the other patterns in place in the output; broadcast_to copies rows.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu.hpp"
#include "kernels/detail/broadcast.hpp"

namespace cohort::kernels::cpu {
namespace {

// out[j] += in[r*cols + j] over all rows.
void sum_rows(const float* in, std::int64_t rows, std::int64_t cols, float* out) {
  if (cols == 1) {  // a sum of everything: vector lanes of partial sums, not one chain of adds
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t r = 0; r < rows; ++r) s += in[r];
    out[0] = s;
    return;
  }
  std::memset(out, 0, static_cast<std::size_t>(cols) * sizeof(float));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * cols;
    for (std::int64_t j = 0; j < cols; ++j) out[j] += row[j];
  }
}

// General case: out (zeroed) += in through broadcast strides of out seen from in's axes.
void accumulate_strided(const tensor& x, tensor& y, const std::vector<std::int64_t>& strides) {
  float* py = y.data<float>();
  std::memset(py, 0, static_cast<std::size_t>(y.numel()) * sizeof(float));
  const float* px = x.data<float>();
  for (std::int64_t i = 0, n = x.numel(); i < n; ++i) py[detail::broadcast_offset(x.shape(), strides, i)] += px[i];
}

// The trailing-axes pattern: `small` (leading 1s dropped) equals the last axes of `big`.
bool is_trailing(const shape& small, const shape& big) {
  int lead = 0;
  while (lead < small.rank() && small[lead] == 1) ++lead;
  int k = small.rank() - lead;
  if (k > big.rank()) return false;
  for (int i = 0; i < k; ++i)
    if (small[lead + i] != big[big.rank() - k + i]) return false;
  return true;
}

// Strides of the output for an input whose `axes` are reduced (keepdim or not).
std::vector<std::int64_t> reduce_strides(const shape& in, const std::vector<int>& axes) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(in.rank()), 0);
  std::int64_t s = 1;
  for (int d = in.rank() - 1; d >= 0; --d) {
    if (std::binary_search(axes.begin(), axes.end(), d)) continue;
    strides[static_cast<std::size_t>(d)] = s;
    s *= in[d];
  }
  return strides;
}

status reduce(const kernel_call& c, bool average) {
  const auto& a = std::get<reduce_attrs>(c.op.attrs);
  const tensor& x = c.in[0];
  tensor& y = c.out[0];
  // Leading axes 0..k-1 reduced and nothing else: a row sum.
  bool leading = true;
  for (std::size_t i = 0; i < a.axes.size(); ++i) leading = leading && a.axes[i] == static_cast<int>(i);
  if (leading && y.numel() > 0) {
    sum_rows(x.data<float>(), x.numel() / y.numel(), y.numel(), y.data<float>());
  } else {
    accumulate_strided(x, y, reduce_strides(x.shape(), a.axes));
  }
  if (average && y.numel() > 0) {
    float inv = static_cast<float>(y.numel()) / static_cast<float>(x.numel());
    float* py = y.data<float>();
    for (std::int64_t i = 0, n = y.numel(); i < n; ++i) py[i] *= inv;
  }
  return {};
}

}  // namespace

status sum(const kernel_call& c) { return reduce(c, false); }
status mean(const kernel_call& c) { return reduce(c, true); }

status sum_to(const kernel_call& c) {
  const tensor& x = c.in[0];
  tensor& y = c.out[0];
  if (is_trailing(y.shape(), x.shape()) && y.numel() > 0) {
    sum_rows(x.data<float>(), x.numel() / y.numel(), y.numel(), y.data<float>());
    return {};
  }
  accumulate_strided(x, y, detail::broadcast_strides(y.shape(), x.shape()));
  return {};
}

status broadcast_to(const kernel_call& c) {
  const tensor& x = c.in[0];
  tensor& y = c.out[0];
  const float* px = x.data<float>();
  float* py = y.data<float>();
  if (x.numel() == 1) {  // a scalar everywhere (a sum's gradient): a fill, not a copy per element
    std::fill(py, py + y.numel(), px[0]);
    return {};
  }
  if (is_trailing(x.shape(), y.shape()) && x.numel() > 0) {
    std::int64_t cols = x.numel();
    for (std::int64_t r = 0, rows = y.numel() / cols; r < rows; ++r)
      std::memcpy(py + r * cols, px, static_cast<std::size_t>(cols) * sizeof(float));
    return {};
  }
  auto strides = detail::broadcast_strides(x.shape(), y.shape());
  for (std::int64_t i = 0, n = y.numel(); i < n; ++i) py[i] = px[detail::broadcast_offset(y.shape(), strides, i)];
  return {};
}

}  // namespace cohort::kernels::cpu
