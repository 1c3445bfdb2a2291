// Fast recommender kernels: embedding_bag adds each bag's rows into its output row (bags split
// across the kernel pool); its gradient scatters them into the dense table gradient; the
// pairwise-dot interaction and its gradient work one sample's [F,D] block at a time in float:
// the dots eight pairs at a time from a transposed copy, each gradient row summed in registers.
// Bad ids go to the reference kernel, which names them.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/thread_pool.hpp"

namespace cohort::kernels::cpu {
namespace {

constexpr std::int64_t grain_elems = 1 << 14;
constexpr std::int64_t prefetch_bags = 8;  // how far ahead a lookup asks for its rows

template <class F>
void for_rows(const kernel_call& c, std::int64_t rows, std::int64_t elems_per_row, F&& body) {
  const std::int64_t grain = std::max<std::int64_t>(1, grain_elems / std::max<std::int64_t>(elems_per_row, 1));
  if (c.pool != nullptr && rows > grain)
    c.pool->parallel_for(rows, grain, body);
  else
    body(0, rows);
}

bool ids_valid(const std::int32_t* ids, std::int64_t n, std::int64_t vocab) {
  bool ok = true;
  for (std::int64_t i = 0; i < n; ++i) ok &= ids[i] == bag_padding || (ids[i] >= 0 && ids[i] < vocab);
  return ok;
}

// A row shard's lookup (bag_attrs::all_rows > 0): the ids it holds, a mean over all of them.
void embedding_bag_row_shard(const kernel_call& c, const bag_attrs& attrs) {
  const std::int64_t local = c.in[0].shape()[0], dim = c.in[0].shape()[1], first = attrs.first_row;
  const std::int64_t length = c.in[1].shape().at(-1), bags = c.in[1].numel() / length;
  const float* table = c.in[0].data<float>();
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  float* y = c.out[0].data<float>();
  for_rows(c, bags, length * dim, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = begin; b < end; ++b) {
      const std::int32_t* bag = ids + b * length;
      float* out = y + b * dim;
      std::memset(out, 0, static_cast<std::size_t>(dim) * sizeof(float));
      std::int64_t count = 0;
      for (std::int64_t l = 0; l < length; ++l) {
        if (bag[l] == bag_padding) continue;
        ++count;
        const std::int64_t r = bag[l] - first;
        if (r < 0 || r >= local) continue;
        const float* row = table + r * dim;
#pragma omp simd
        for (std::int64_t j = 0; j < dim; ++j) out[j] += row[j];
      }
      if (attrs.mean && count > 1) {
        const float inv = 1.f / static_cast<float>(count);
#pragma omp simd
        for (std::int64_t j = 0; j < dim; ++j) out[j] *= inv;
      }
    }
  });
}

}  // namespace

status embedding_bag(const kernel_call& c) {
  const auto& attrs = std::get<bag_attrs>(c.op.attrs);
  const bool mean = attrs.mean;
  const std::int64_t vocab = c.in[0].shape()[0], dim = c.in[0].shape()[1];
  const std::int64_t length = c.in[1].shape().at(-1), bags = length > 0 ? c.in[1].numel() / length : 0;
  const float* table = c.in[0].data<float>();
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  float* y = c.out[0].data<float>();
  if (attrs.all_rows > 0) {
    if (bags == 0 || !ids_valid(ids, c.in[1].numel(), attrs.all_rows)) return ref::embedding_bag(c);
    embedding_bag_row_shard(c, attrs);
    return {};
  }
  if (bags == 0 || !ids_valid(ids, c.in[1].numel(), vocab)) return ref::embedding_bag(c);
  const std::int64_t n_ids = c.in[1].numel();
  for_rows(c, bags, length * dim, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = begin; b < end; ++b) {
      const std::int32_t* bag = ids + b * length;
      float* out = y + b * dim;
      // rows of a large table are cache misses: ask for the ones a few bags ahead now
      for (std::int64_t l = 0; l < length; ++l) {
        const std::int64_t ahead = (b + prefetch_bags) * length + l;
        if (ahead < n_ids && ids[ahead] >= 0) __builtin_prefetch(table + static_cast<std::int64_t>(ids[ahead]) * dim);
      }
      std::int64_t used = 0;
      for (std::int64_t l = 0; l < length; ++l) {
        if (bag[l] == bag_padding) continue;
        const float* row = table + static_cast<std::int64_t>(bag[l]) * dim;
        if (used++ == 0) {
#pragma omp simd
          for (std::int64_t j = 0; j < dim; ++j) out[j] = row[j];
        } else {
#pragma omp simd
          for (std::int64_t j = 0; j < dim; ++j) out[j] += row[j];
        }
      }
      if (used == 0) std::memset(out, 0, static_cast<std::size_t>(dim) * sizeof(float));
      if (mean && used > 1) {
        const float inv = 1.f / static_cast<float>(used);
#pragma omp simd
        for (std::int64_t j = 0; j < dim; ++j) out[j] *= inv;
      }
    }
  });
  return {};
}

status embedding_bag_grad(const kernel_call& c) {
  const bool mean = std::get<bag_attrs>(c.op.attrs).mean;
  tensor& dtable = c.out[0];
  const std::int64_t vocab = dtable.shape()[0], dim = dtable.shape()[1];
  const std::int64_t length = c.in[1].shape().at(-1), bags = length > 0 ? c.in[1].numel() / length : 0;
  const float* dy = c.in[0].data<float>();
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  if (!ids_valid(ids, c.in[1].numel(), vocab)) return ref::embedding_bag_grad(c);
  float* dt = dtable.data<float>();
  std::memset(dt, 0, static_cast<std::size_t>(dtable.numel()) * sizeof(float));
  for (std::int64_t b = 0; b < bags; ++b) {  // serial: two bags may share a row
    const std::int32_t* bag = ids + b * length;
    std::int64_t used = 0;
    for (std::int64_t l = 0; l < length; ++l) used += bag[l] != bag_padding ? 1 : 0;
    // a mean's share is dy / count: a division, never fused into the add (the sparse
    // gradient's entries are the same quotients, summed by row in the same order)
    const float count = mean ? static_cast<float>(used) : 1.f;
    const float* src = dy + b * dim;
    for (std::int64_t l = 0; l < length; ++l) {
      if (bag[l] == bag_padding) continue;
      float* row = dt + static_cast<std::int64_t>(bag[l]) * dim;
      if (!mean) {
#pragma omp simd
        for (std::int64_t j = 0; j < dim; ++j) row[j] += src[j];
      } else {
#pragma omp simd
        for (std::int64_t j = 0; j < dim; ++j) row[j] += src[j] / count;
      }
    }
  }
  return {};
}

status embedding_bag_sparse_grad(const kernel_call& c) {
  const bool mean = std::get<bag_attrs>(c.op.attrs).mean;
  const std::int64_t vocab = std::get<bag_attrs>(c.op.attrs).table[0], dim = c.out[1].shape()[1];
  const std::int64_t length = c.in[1].shape().at(-1), bags = length > 0 ? c.in[1].numel() / length : 0;
  const std::int32_t* ids = c.in[1].data<std::int32_t>();
  if (!ids_valid(ids, c.in[1].numel(), vocab)) return ref::embedding_bag_sparse_grad(c);
  const float* dy = c.in[0].data<float>();
  std::int32_t* rows = c.out[0].data<std::int32_t>();
  float* values = c.out[1].data<float>();
  std::memcpy(rows, ids, static_cast<std::size_t>(c.in[1].numel()) * sizeof(std::int32_t));
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int32_t* bag = ids + b * length;
    std::int64_t used = 0;
    for (std::int64_t l = 0; l < length; ++l) used += bag[l] != bag_padding ? 1 : 0;
    const float count = mean ? static_cast<float>(used) : 1.f;  // the dense kernel's quotient
    const float* src = dy + b * dim;
    for (std::int64_t l = 0; l < length; ++l) {
      float* v = values + (b * length + l) * dim;
      if (bag[l] == bag_padding) {
        std::memset(v, 0, static_cast<std::size_t>(dim) * sizeof(float));
      } else if (!mean) {
#pragma omp simd
        for (std::int64_t j = 0; j < dim; ++j) v[j] = src[j];
      } else {
#pragma omp simd
        for (std::int64_t j = 0; j < dim; ++j) v[j] = src[j] / count;
      }
    }
  }
  return {};
}

namespace {

constexpr std::int64_t dot_lanes = 8;             // pairs computed at once: one AVX2 register
constexpr std::int64_t transposed_floats = 4096;  // a sample's [D, F] copy, on the stack

// One sample's dots by rows of pairs: x_i against a block of 8 x_j at once, from a [D, F]
// copy of the sample (`t`, F rounded up to `stride`), each dot summed over k in order.
void sample_dots(const float* m, std::int64_t f, std::int64_t d, std::int64_t stride, float* t, float* out) {
  for (std::int64_t j = 0; j < f; ++j)
    for (std::int64_t k = 0; k < d; ++k) t[k * stride + j] = m[j * d + k];
  for (std::int64_t i = 1; i < f; ++i) {
    const float* xi = m + i * d;
    for (std::int64_t jb = 0; jb < i; jb += dot_lanes) {
      float acc[dot_lanes] = {};
      for (std::int64_t k = 0; k < d; ++k) {
        const float a = xi[k];
        const float* tk = t + k * stride + jb;
#pragma omp simd
        for (std::int64_t l = 0; l < dot_lanes; ++l) acc[l] += a * tk[l];
      }
      const std::int64_t n = std::min(dot_lanes, i - jb);
      for (std::int64_t l = 0; l < n; ++l) *out++ = acc[l];
    }
  }
}

}  // namespace

status pairwise_dot(const kernel_call& c) {
  const tensor& x = c.in[0];
  const std::int64_t f = x.shape().at(-2), d = x.shape().at(-1), pairs = f * (f - 1) / 2;
  const std::int64_t rows = x.numel() / (f * d);
  const float* xs = x.data<float>();
  float* y = c.out[0].data<float>();
  const std::int64_t stride = (f + dot_lanes - 1) / dot_lanes * dot_lanes;
  for_rows(c, rows, pairs * d, [&](std::int64_t begin, std::int64_t end) {
    if (d * stride <= transposed_floats) {
      float t[transposed_floats] = {};  // the padding past F stays zero
      for (std::int64_t r = begin; r < end; ++r) sample_dots(xs + r * f * d, f, d, stride, t, y + r * pairs);
      return;
    }
    for (std::int64_t r = begin; r < end; ++r) {  // wide samples: one pair at a time
      const float* m = xs + r * f * d;
      float* out = y + r * pairs;
      for (std::int64_t i = 1; i < f; ++i)
        for (std::int64_t j = 0; j < i; ++j) {
          float s = 0.f;
          for (std::int64_t k = 0; k < d; ++k) s += m[i * d + k] * m[j * d + k];
          *out++ = s;
        }
    }
  });
  return {};
}

namespace {

// One sample's gradient for a width D known at compile time: dx_i = sum over j != i of
// dy(i, j) x_j, summed in registers in the order of j (the order the pair loop below adds
// them to row i, so both give the same bits).
template <std::int64_t D>
void sample_dot_grad(const float* m, const float* g, std::int64_t f, float* dx) {
  for (std::int64_t i = 0; i < f; ++i) {
    float acc[D] = {};
    for (std::int64_t j = 0; j < f; ++j) {
      if (j == i) continue;
      const float w = j < i ? g[i * (i - 1) / 2 + j] : g[j * (j - 1) / 2 + i];
      const float* xj = m + j * D;
#pragma omp simd
      for (std::int64_t k = 0; k < D; ++k) acc[k] += w * xj[k];
    }
    std::memcpy(dx + i * D, acc, sizeof(acc));
  }
}

// Any width: pair by pair, each adding to both rows.
void sample_dot_grad_pairs(const float* m, const float* g, std::int64_t f, std::int64_t d, float* dx) {
  std::memset(dx, 0, static_cast<std::size_t>(f * d) * sizeof(float));
  for (std::int64_t i = 1; i < f; ++i) {
    const float* xi = m + i * d;
    float* di = dx + i * d;
    for (std::int64_t j = 0; j < i; ++j) {
      const float w = g[i * (i - 1) / 2 + j];
      const float* xj = m + j * d;
      float* dj = dx + j * d;
#pragma omp simd
      for (std::int64_t k = 0; k < d; ++k) {
        di[k] += w * xj[k];
        dj[k] += w * xi[k];
      }
    }
  }
}

}  // namespace

status pairwise_dot_grad(const kernel_call& c) {
  const tensor& x = c.in[1];
  const std::int64_t f = x.shape().at(-2), d = x.shape().at(-1), pairs = f * (f - 1) / 2;
  const std::int64_t rows = x.numel() / (f * d);
  const float* dy = c.in[0].data<float>();
  const float* xs = x.data<float>();
  float* dx = c.out[0].data<float>();
  for_rows(c, rows, pairs * d, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* m = xs + r * f * d;
      const float* g = dy + r * pairs;
      float* out = dx + r * f * d;
      switch (d) {  // the widths recommender models use get their rows in registers
        case 8:
          sample_dot_grad<8>(m, g, f, out);
          break;
        case 16:
          sample_dot_grad<16>(m, g, f, out);
          break;
        case 32:
          sample_dot_grad<32>(m, g, f, out);
          break;
        default:
          sample_dot_grad_pairs(m, g, f, d, out);
      }
    }
  });
  return {};
}

}  // namespace cohort::kernels::cpu
