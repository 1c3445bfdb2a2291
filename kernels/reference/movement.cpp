// Reference data-movement kernels: embedding lookup, reshape, permute, slice, concat,
// causal mask, and the gradients of embedding and slice.
#include <cstring>
#include <string>

#include "kernels/detail/broadcast.hpp"
#include "kernels/reference/reference.hpp"

namespace cohort::kernels::ref {
namespace {

status check_id(std::int32_t id, std::int64_t vocab, std::int64_t pos) {
  if (id < 0 || id >= vocab)
    return make_error(errc::invalid_argument, "embedding: id " + std::to_string(id) + " at position " +
                                                  std::to_string(pos) + " is outside [0," + std::to_string(vocab) +
                                                  ")");
  return {};
}

}  // namespace

status embedding(const kernel_call& c) {
  const tensor& table = c.in[0];
  std::int64_t vocab = table.shape()[0], dim = table.shape()[1];
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  float* y = c.out[0].data<float>();
  for (std::int64_t i = 0, n = c.in[1].numel(); i < n; ++i) {
    if (auto st = check_id(ids[i], vocab, i); !st) return st;
    for (std::int64_t j = 0; j < dim; ++j) y[i * dim + j] = table.data<float>()[ids[i] * dim + j];
  }
  return {};
}

status embedding_grad(const kernel_call& c) {
  tensor& dtable = c.out[0];
  std::int64_t vocab = dtable.shape()[0], dim = dtable.shape()[1];
  const float* dy = c.in[0].data<float>();
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  float* dt = dtable.data<float>();
  for (std::int64_t i = 0, n = dtable.numel(); i < n; ++i) dt[i] = 0.f;
  for (std::int64_t i = 0, n = c.in[1].numel(); i < n; ++i) {
    if (auto st = check_id(ids[i], vocab, i); !st) return st;
    for (std::int64_t j = 0; j < dim; ++j) dt[ids[i] * dim + j] += dy[i * dim + j];
  }
  return {};
}

status reshape(const kernel_call& c) {
  // Executors alias a reshape's output to its input; copy only when they are distinct.
  const tensor& x = c.in[0];
  tensor& y = c.out[0];
  if (y.data<std::byte>() != x.data<std::byte>())
    std::memcpy(y.data<std::byte>(), x.data<std::byte>(), static_cast<std::size_t>(x.numel()) * size_of(x.type()));
  return {};
}

status permute(const kernel_call& c) {
  const auto& perm = std::get<permute_attrs>(c.op.attrs).perm;
  c.out[0].copy_from(c.in[0].permute(perm));
  return {};
}

status slice(const kernel_call& c) {
  const auto& a = std::get<slice_attrs>(c.op.attrs);
  c.out[0].copy_from(c.in[0].slice(a.axis, a.start, a.end));
  return {};
}

status slice_grad(const kernel_call& c) {
  const auto& a = std::get<slice_attrs>(c.op.attrs);
  c.out[0].fill(0.f);
  tensor window = c.out[0].slice(a.axis, a.start, a.end);
  window.copy_from(c.in[0]);
  return {};
}

status concat(const kernel_call& c) {
  int axis = std::get<concat_attrs>(c.op.attrs).axis;
  std::int64_t offset = 0;
  for (const tensor& x : c.in) {
    std::int64_t extent = x.shape()[axis];
    tensor window = c.out[0].slice(axis, offset, offset + extent);
    window.copy_from(x);
    offset += extent;
  }
  return {};
}

status causal_mask(const kernel_call& c) {
  float fill = std::get<causal_mask_attrs>(c.op.attrs).fill;
  const tensor& x = c.in[0];
  std::int64_t t = x.shape().at(-1);
  std::int64_t mats = t == 0 ? 0 : x.numel() / (t * t);
  const float* px = x.data<float>();
  float* py = c.out[0].data<float>();
  for (std::int64_t m = 0; m < mats; ++m)
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t j = 0; j < t; ++j) {
        std::int64_t at = (m * t + i) * t + j;
        py[at] = j > i ? fill : px[at];
      }
  return {};
}

}  // namespace cohort::kernels::ref
