// Reference reductions and broadcasts: sum, mean, sum_to, broadcast_to.
#include <algorithm>

#include "kernels/detail/broadcast.hpp"
#include "kernels/reference/reference.hpp"

namespace cohort::kernels::ref {
namespace {

// Output offset of input element `flat` when the axes in `axes` are reduced away.
std::int64_t reduced_offset(const shape& in, const std::vector<int>& axes, std::int64_t flat) {
  std::int64_t off = 0, stride = 1;
  for (int d = in.rank() - 1; d >= 0; --d) {
    std::int64_t idx = flat % in[d];
    flat /= in[d];
    if (std::binary_search(axes.begin(), axes.end(), d)) continue;
    off += idx * stride;
    stride *= in[d];
  }
  return off;
}

status reduce(const kernel_call& c, bool average) {
  const auto& a = std::get<reduce_attrs>(c.op.attrs);
  const tensor& x = c.in[0];
  tensor& y = c.out[0];
  std::vector<double> acc(static_cast<std::size_t>(y.numel()), 0.0);
  const float* px = x.data<float>();
  for (std::int64_t i = 0, n = x.numel(); i < n; ++i)
    acc[static_cast<std::size_t>(reduced_offset(x.shape(), a.axes, i))] += px[i];
  double count = y.numel() == 0 ? 1.0 : static_cast<double>(x.numel()) / static_cast<double>(y.numel());
  float* py = y.data<float>();
  for (std::int64_t i = 0, n = y.numel(); i < n; ++i)
    py[i] = static_cast<float>(average ? acc[static_cast<std::size_t>(i)] / count : acc[static_cast<std::size_t>(i)]);
  return {};
}

}  // namespace

status sum(const kernel_call& c) { return reduce(c, false); }
status mean(const kernel_call& c) { return reduce(c, true); }

status sum_to(const kernel_call& c) {
  const tensor& x = c.in[0];
  tensor& y = c.out[0];
  auto strides = detail::broadcast_strides(y.shape(), x.shape());
  std::vector<double> acc(static_cast<std::size_t>(y.numel()), 0.0);
  const float* px = x.data<float>();
  for (std::int64_t i = 0, n = x.numel(); i < n; ++i)
    acc[static_cast<std::size_t>(detail::broadcast_offset(x.shape(), strides, i))] += px[i];
  float* py = y.data<float>();
  for (std::int64_t i = 0, n = y.numel(); i < n; ++i) py[i] = static_cast<float>(acc[static_cast<std::size_t>(i)]);
  return {};
}

status broadcast_to(const kernel_call& c) {
  const tensor& x = c.in[0];
  tensor& y = c.out[0];
  auto strides = detail::broadcast_strides(x.shape(), y.shape());
  const float* px = x.data<float>();
  float* py = y.data<float>();
  for (std::int64_t i = 0, n = y.numel(); i < n; ++i) py[i] = px[detail::broadcast_offset(y.shape(), strides, i)];
  return {};
}

}  // namespace cohort::kernels::ref
