// SGD and AdamW updates.
#include "kernels/optimizer.hpp"

#include <cmath>

namespace cohort::kernels {
namespace {

void sgd(float* p, const float* g, std::int64_t n, optimizer_state& st, const sgd_config& c) {
  float* buf = st.slots.empty() ? nullptr : st.slots[0].data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if (c.weight_decay != 0.f) d += c.weight_decay * p[i];
    if (buf != nullptr) {
      buf[i] = st.step == 0 ? d : c.momentum * buf[i] + d;
      d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
    }
    p[i] -= c.lr * d;
  }
}

void adamw(float* p, const float* g, std::int64_t n, optimizer_state& st, const adamw_config& c) {
  float* m = st.slots[0].data<float>();
  float* v = st.slots[1].data<float>();
  const double t = static_cast<double>(st.step + 1);
  const float decay = static_cast<float>(1.0 - static_cast<double>(c.lr) * c.weight_decay);
  const float step_size = static_cast<float>(c.lr / (1.0 - std::pow(static_cast<double>(c.beta1), t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(c.beta2), t)));
  const float one_minus_b1 = 1.f - c.beta1, one_minus_b2 = 1.f - c.beta2;
  for (std::int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = m[i] * c.beta1 + g[i] * one_minus_b1;
    v[i] = v[i] * c.beta2 + g[i] * g[i] * one_minus_b2;
    float denom = std::sqrt(v[i]) / bc2_sqrt + c.eps;
    p[i] += -step_size * (m[i] / denom);
  }
}

}  // namespace

optimizer_state make_state(const tensor& param, const optimizer_config& cfg) {
  optimizer_state st;
  for (int i = 0; i < state_slots(cfg); ++i) st.slots.push_back(tensor::zeros(param.shape()));
  return st;
}

void apply_update(tensor& param, const tensor& grad, optimizer_state& state,
                  const optimizer_config& cfg) {
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  std::int64_t n = param.numel();
  if (const auto* s = std::get_if<sgd_config>(&cfg)) sgd(p, g, n, state, *s);
  else adamw(p, g, n, state, std::get<adamw_config>(cfg));
  ++state.step;
}

}  // namespace cohort::kernels
