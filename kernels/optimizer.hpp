// Optimizer arithmetic for the rules of graph/optimizer.hpp, matching torch.optim.SGD and
// torch.optim.AdamW (PyTorch 1.13, single-tensor path) operation for operation.
//
//   tensor param = tensor::full({4}, 1.f), grad = tensor::full({4}, 0.5f);
//   optimizer_config cfg = adamw_config{.lr = 0.01f};
//   optimizer_state st = make_state(param, cfg);     // zeroed slots (exp_avg, exp_avg_sq), step 0
//   apply_update(param, grad, st, cfg);              // in place; st.step becomes 1
//   assert(st.step == 1 && st.slots.size() == 2);
#pragma once

#include <cstdint>
#include <vector>

#include "graph/optimizer.hpp"
#include "graph/tensor.hpp"

namespace cohort::kernels {

struct optimizer_state {
  std::vector<tensor> slots;  // sgd: [momentum buffer]; adamw: [exp_avg, exp_avg_sq]
  std::int64_t step = 0;      // updates applied so far
};

optimizer_state make_state(const tensor& param, const optimizer_config& cfg);

/// One update of `param` (contiguous f32) from `grad` (same shape). Allocates nothing.
void apply_update(tensor& param, const tensor& grad, optimizer_state& state, const optimizer_config& cfg);

}  // namespace cohort::kernels
