// Fused attention, reference: every (batch slice, query) row in plain loops, the dot products
// and the softmax in double, the gradients' sums over rows in the float outputs. The
// scores are recomputed where they are needed, never stored (a kernel does not allocate): a
// pass for the row's maximum, one for its normaliser, one for the output; the backward pass
// recomputes them the same way.
#include <cmath>
#include <limits>

#include "kernels/reference/reference.hpp"

namespace cohort::kernels::ref {
namespace {

struct geometry {
  std::int64_t slices = 1, t = 0, s = 0, d = 0;  // batch slices, queries, keys, head width
};

geometry geometry_of(const shape& q, const shape& k) {
  geometry g;
  g.t = q.at(-2), g.s = k.at(-2), g.d = q.at(-1);
  for (int i = 0; i + 2 < q.rank(); ++i) g.slices *= q[i];
  return g;
}

double dot(const float* a, const float* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Row t of one slice: its visible keys [0, last) and the log of its softmax normaliser.
struct row {
  std::int64_t last = 0;
  double max = 0, log_sum = 0;
};

row row_of(const float* q_t, const float* k, std::int64_t t, const geometry& g, const attention_attrs& a) {
  row r;
  r.last = a.causal ? t + 1 : g.s;
  r.max = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < r.last; ++j) r.max = std::max(r.max, a.scale * dot(q_t, k + j * g.d, g.d));
  double sum = 0;
  for (std::int64_t j = 0; j < r.last; ++j) sum += std::exp(a.scale * dot(q_t, k + j * g.d, g.d) - r.max);
  r.log_sum = std::log(sum);
  return r;
}

}  // namespace

status attention(const kernel_call& c) {
  const auto& a = std::get<attention_attrs>(c.op.attrs);
  const geometry g = geometry_of(c.in[0].shape(), c.in[1].shape());
  const float* q = c.in[0].data<float>();
  const float* k = c.in[1].data<float>();
  const float* v = c.in[2].data<float>();
  float* y = c.out[0].data<float>();
  for (std::int64_t b = 0; b < g.slices; ++b) {
    const float* qb = q + b * g.t * g.d;
    const float* kb = k + b * g.s * g.d;
    const float* vb = v + b * g.s * g.d;
    for (std::int64_t t = 0; t < g.t; ++t) {
      const float* q_t = qb + t * g.d;
      const row r = row_of(q_t, kb, t, g, a);
      float* y_t = y + (b * g.t + t) * g.d;
      for (std::int64_t i = 0; i < g.d; ++i) {
        double acc = 0;
        for (std::int64_t j = 0; j < r.last; ++j)
          acc += std::exp(a.scale * dot(q_t, kb + j * g.d, g.d) - r.max - r.log_sum) * vb[j * g.d + i];
        y_t[i] = static_cast<float>(acc);
      }
    }
  }
  return {};
}

// With p the softmax row and y = p v: dv_j += p_j dy, dp_j = dy . v_j, ds_j = p_j (dp_j - dy . y),
// dq += scale ds_j k_j, dk_j += scale ds_j q.
status attention_grad(const kernel_call& c) {
  const auto& a = std::get<attention_attrs>(c.op.attrs);
  const geometry g = geometry_of(c.in[1].shape(), c.in[2].shape());
  const float* dy = c.in[0].data<float>();
  const float* q = c.in[1].data<float>();
  const float* k = c.in[2].data<float>();
  const float* v = c.in[3].data<float>();
  const float* y = c.in[4].data<float>();
  float* dq = c.out[0].data<float>();
  float* dk = c.out[1].data<float>();
  float* dv = c.out[2].data<float>();
  for (std::int64_t i = 0; i < c.out[1].numel(); ++i) dk[i] = dv[i] = 0.f;
  for (std::int64_t b = 0; b < g.slices; ++b) {
    const std::int64_t qo = b * g.t * g.d, ko = b * g.s * g.d;
    for (std::int64_t t = 0; t < g.t; ++t) {
      const float* q_t = q + qo + t * g.d;
      const float* dy_t = dy + qo + t * g.d;
      const row r = row_of(q_t, k + ko, t, g, a);
      const double dy_y = dot(dy_t, y + qo + t * g.d, g.d);
      float* dq_t = dq + qo + t * g.d;  // accumulated in place (dq, dk, dv in float: no scratch)
      for (std::int64_t i = 0; i < g.d; ++i) dq_t[i] = 0.f;
      for (std::int64_t j = 0; j < r.last; ++j) {
        const float* k_j = k + ko + j * g.d;
        const double p = std::exp(a.scale * dot(q_t, k_j, g.d) - r.max - r.log_sum);
        const double ds = p * (dot(dy_t, v + ko + j * g.d, g.d) - dy_y);
        for (std::int64_t i = 0; i < g.d; ++i) {
          dq_t[i] += static_cast<float>(a.scale * ds * k_j[i]);
          dk[ko + j * g.d + i] += static_cast<float>(a.scale * ds * q_t[i]);
          dv[ko + j * g.d + i] += static_cast<float>(p * dy_t[i]);
        }
      }
    }
  }
  return {};
}

}  // namespace cohort::kernels::ref
