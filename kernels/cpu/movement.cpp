// Fast data movement: embedding rows by memcpy, permute as an odometer over output rows
// with a contiguous inner copy when the innermost axis stays innermost, reshape as an
// alias (executors give its output the input's buffer), concat and slice as one memcpy per
// outer index (the axis and everything inside it are contiguous).
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cpu/cpu.hpp"
#include "kernels/reference/reference.hpp"

namespace cohort::kernels::cpu {

status embedding(const kernel_call& c) {
  const tensor& table = c.in[0];
  std::int64_t vocab = table.shape()[0], dim = table.shape()[1];
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  const float* t = table.data<float>();
  float* y = c.out[0].data<float>();
  for (std::int64_t i = 0, n = c.in[1].numel(); i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) return ref::embedding(c);  // reports the bad id
    std::memcpy(y + i * dim, t + ids[i] * dim, static_cast<std::size_t>(dim) * sizeof(float));
  }
  return {};
}

status embedding_grad(const kernel_call& c) {
  tensor& dtable = c.out[0];
  std::int64_t vocab = dtable.shape()[0], dim = dtable.shape()[1];
  const float* dy = c.in[0].data<float>();
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  float* dt = dtable.data<float>();
  std::memset(dt, 0, static_cast<std::size_t>(dtable.numel()) * sizeof(float));
  for (std::int64_t i = 0, n = c.in[1].numel(); i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) return ref::embedding_grad(c);
    float* row = dt + ids[i] * dim;
    const float* src = dy + i * dim;
    for (std::int64_t j = 0; j < dim; ++j) row[j] += src[j];
  }
  return {};
}

status reshape(const kernel_call& c) { return ref::reshape(c); }

status permute(const kernel_call& c) {
  const auto& perm = std::get<permute_attrs>(c.op.attrs).perm;
  const tensor& x = c.in[0];
  tensor& y = c.out[0];
  const int rank = y.shape().rank();
  if (rank == 0 || y.numel() == 0) return ref::permute(c);
  std::size_t elem = size_of(x.type());
  if (elem != 4) return ref::permute(c);
  if (rank > 16) return ref::permute(c);
  std::int64_t in_strides[16];  // row-major strides of the input (no heap: hot path)
  in_strides[rank - 1] = 1;
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * x.shape()[d + 1];
  std::int64_t stride[16];  // stride in the input of each output axis
  std::int64_t extent[16];
  for (int d = 0; d < rank; ++d) {
    stride[d] = in_strides[perm[static_cast<std::size_t>(d)]];
    extent[d] = y.shape()[d];
  }
  const std::int64_t inner = extent[rank - 1];
  const std::int64_t inner_stride = stride[rank - 1];
  const std::int64_t outer = y.numel() / inner;
  std::int64_t idx[16] = {};
  const std::uint32_t* src = x.data<std::uint32_t>();
  std::uint32_t* dst = y.data<std::uint32_t>();
  std::int64_t base = 0;
  for (std::int64_t o = 0; o < outer; ++o) {
    if (inner_stride == 1) {
      std::memcpy(dst, src + base, static_cast<std::size_t>(inner) * elem);
    } else {
      for (std::int64_t j = 0; j < inner; ++j) dst[j] = src[base + j * inner_stride];
    }
    dst += inner;
    // advance the odometer over the outer axes
    for (int d = rank - 2; d >= 0; --d) {
      base += stride[d];
      if (++idx[d] < extent[d]) break;
      base -= stride[d] * extent[d];
      idx[d] = 0;
    }
  }
  return {};
}

namespace {

// A tensor as [outer, extent(axis) * inner] rows of bytes.
struct axis_rows {
  std::int64_t outer = 1, inner = 1;
};

axis_rows rows_around(const shape& s, int axis) {
  axis_rows r;
  for (int d = 0; d < axis; ++d) r.outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) r.inner *= s[d];
  return r;
}

// Copies [outer, n] blocks: dst row o at dst_at, src row o at src_at, `n` elements each.
void copy_blocks(std::byte* dst, std::int64_t dst_row, std::int64_t dst_at, const std::byte* src, std::int64_t src_row,
                 std::int64_t src_at, std::int64_t outer, std::int64_t n, std::size_t elem) {
  for (std::int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + static_cast<std::size_t>(o * dst_row + dst_at) * elem,
                src + static_cast<std::size_t>(o * src_row + src_at) * elem, static_cast<std::size_t>(n) * elem);
}

}  // namespace

status concat(const kernel_call& c) {
  const int axis = std::get<concat_attrs>(c.op.attrs).axis;
  tensor& y = c.out[0];
  const axis_rows r = rows_around(y.shape(), axis);
  const std::size_t elem = size_of(y.type());
  const std::int64_t out_row = y.shape()[axis] * r.inner;
  std::int64_t at = 0;
  for (const tensor& x : c.in) {
    const std::int64_t n = x.shape()[axis] * r.inner;
    copy_blocks(y.data<std::byte>(), out_row, at, x.data<std::byte>(), n, 0, r.outer, n, elem);
    at += n;
  }
  return {};
}

status slice(const kernel_call& c) {
  const auto& a = std::get<slice_attrs>(c.op.attrs);
  const tensor& x = c.in[0];
  const axis_rows r = rows_around(x.shape(), a.axis);
  const std::int64_t n = (a.end - a.start) * r.inner;
  copy_blocks(c.out[0].data<std::byte>(), n, 0, x.data<std::byte>(), x.shape()[a.axis] * r.inner, a.start * r.inner,
              r.outer, n, size_of(x.type()));
  return {};
}

status slice_grad(const kernel_call& c) {
  const auto& a = std::get<slice_attrs>(c.op.attrs);
  tensor& dx = c.out[0];
  std::memset(dx.data<std::byte>(), 0, static_cast<std::size_t>(dx.numel()) * size_of(dx.type()));
  const axis_rows r = rows_around(dx.shape(), a.axis);
  const std::int64_t n = (a.end - a.start) * r.inner;
  copy_blocks(dx.data<std::byte>(), dx.shape()[a.axis] * r.inner, a.start * r.inner, c.in[0].data<std::byte>(), n, 0,
              r.outer, n, size_of(dx.type()));
  return {};
}

}  // namespace cohort::kernels::cpu
