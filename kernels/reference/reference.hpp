// Plain-loop reference kernels: one per op, written for clarity, accumulating in double.
// They are the oracle every fast kernel is tested against, and they stay forever.
//
//   node op{op_kind::gelu, no_attrs{}, {}, {}, "example"};   // a kernel reads only kind and attrs
//   std::vector<tensor> in{tensor::full({3}, 1.f)};
//   std::vector<tensor> out{tensor::empty({3})};
//   if (auto st = ref::gelu({op, in, out}); !st) return st;   // out[0] = 0.8413447 each (erf form)
//   assert(reference_kernels()[op_kind::gelu] == &ref::gelu);
#pragma once

#include "kernels/kernel.hpp"

namespace cohort::kernels::ref {

status matmul(const kernel_call& c);
status add(const kernel_call& c);
status sub(const kernel_call& c);
status mul(const kernel_call& c);
status div(const kernel_call& c);
status bias_add(const kernel_call& c);
status scale(const kernel_call& c);
status relu(const kernel_call& c);
status gelu(const kernel_call& c);
status tanh(const kernel_call& c);
status softmax(const kernel_call& c);
status log_softmax(const kernel_call& c);
status softmax_cross_entropy(const kernel_call& c);
status mse(const kernel_call& c);
status layernorm(const kernel_call& c);
status embedding(const kernel_call& c);
status reshape(const kernel_call& c);
status permute(const kernel_call& c);
status slice(const kernel_call& c);
status concat(const kernel_call& c);
status sum(const kernel_call& c);
status mean(const kernel_call& c);
status causal_mask(const kernel_call& c);
status attention(const kernel_call& c);
status attention_grad(const kernel_call& c);
status embedding_bag(const kernel_call& c);
status embedding_bag_grad(const kernel_call& c);
status embedding_bag_sparse_grad(const kernel_call& c);
status pairwise_dot(const kernel_call& c);
status pairwise_dot_grad(const kernel_call& c);
status bce_with_logits(const kernel_call& c);
status bce_with_logits_grad(const kernel_call& c);
status sum_to(const kernel_call& c);
status broadcast_to(const kernel_call& c);
status relu_grad(const kernel_call& c);
status gelu_grad(const kernel_call& c);
status tanh_grad(const kernel_call& c);
status softmax_grad(const kernel_call& c);
status log_softmax_grad(const kernel_call& c);
status softmax_cross_entropy_grad(const kernel_call& c);
status mse_grad(const kernel_call& c);
status layernorm_grad(const kernel_call& c);
status embedding_grad(const kernel_call& c);
status slice_grad(const kernel_call& c);

}  // namespace cohort::kernels::ref
