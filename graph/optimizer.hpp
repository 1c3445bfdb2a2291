// Optimizers as graph-level rules: what state each parameter carries and the update's
// hyper-parameters. The arithmetic lives in kernels/optimizer.hpp; keeping the rule here
// lets the planner size optimizer state and lets parameter actors own it per shard.
// Semantics follow torch.optim.SGD, torch.optim.AdamW and torch.optim.Adagrad exactly.
//
//   optimizer_config opt = adamw_config{.lr = 1e-3f, .beta2 = 0.95f, .weight_decay = 0.1f};
//   int slots = state_slots(opt);    // 2: exp_avg and exp_avg_sq per parameter
//   assert(state_slots(sgd_config{.lr = 0.1f, .momentum = 0.9f}) == 1 && learning_rate(opt) == 1e-3f);
#pragma once

#include <variant>

namespace cohort {

/// torch.optim.SGD: g += wd*p; buf = momentum*buf + g (buf = g at the first step);
/// g = nesterov ? g + momentum*buf : buf; p -= lr*g.
struct sgd_config {
  float lr = 0.01f;
  float momentum = 0.f;
  float weight_decay = 0.f;
  bool nesterov = false;
};

/// torch.optim.AdamW: p *= 1 - lr*wd; m, v moving averages; bias-corrected step.
struct adamw_config {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};

/// torch.optim.Adagrad (lr_decay 0, weight_decay 0, initial accumulator 0): sum += g*g;
/// p -= lr * g / (sqrt(sum) + eps). A zero gradient leaves p and sum as they are, so a table
/// updated from its touched rows alone is updated exactly (torch's sparse Adagrad).
struct adagrad_config {
  float lr = 0.01f;
  float eps = 1e-10f;
};

using optimizer_config = std::variant<sgd_config, adamw_config, adagrad_config>;

/// Number of state tensors (each shaped like the parameter) the optimizer keeps.
inline int state_slots(const optimizer_config& c) {
  if (const auto* s = std::get_if<sgd_config>(&c)) return s->momentum != 0.f ? 1 : 0;
  if (std::holds_alternative<adagrad_config>(c)) return 1;
  return 2;
}

inline float learning_rate(const optimizer_config& c) {
  return std::visit([](const auto& x) { return x.lr; }, c);
}

/// The same optimizer at learning rate `lr`.
inline optimizer_config with_learning_rate(optimizer_config c, float lr) {
  std::visit([lr](auto& x) { x.lr = lr; }, c);
  return c;
}

}  // namespace cohort
