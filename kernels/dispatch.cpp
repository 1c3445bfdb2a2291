// The two dispatch tables, written out in full.
#include "kernels/dispatch.hpp"

#include "kernels/cpu/cpu.hpp"
#include "kernels/reference/reference.hpp"

namespace cohort::kernels {

dispatch_table reference_kernels() {
  using k = op_kind;
  dispatch_table t("reference");
  t.set(k::matmul, ref::matmul);
  t.set(k::add, ref::add);
  t.set(k::sub, ref::sub);
  t.set(k::mul, ref::mul);
  t.set(k::div, ref::div);
  t.set(k::bias_add, ref::bias_add);
  t.set(k::scale, ref::scale);
  t.set(k::relu, ref::relu);
  t.set(k::gelu, ref::gelu);
  t.set(k::tanh, ref::tanh);
  t.set(k::softmax, ref::softmax);
  t.set(k::log_softmax, ref::log_softmax);
  t.set(k::softmax_cross_entropy, ref::softmax_cross_entropy);
  t.set(k::mse, ref::mse);
  t.set(k::layernorm, ref::layernorm);
  t.set(k::embedding, ref::embedding);
  t.set(k::reshape, ref::reshape);
  t.set(k::permute, ref::permute);
  t.set(k::slice, ref::slice);
  t.set(k::concat, ref::concat);
  t.set(k::sum, ref::sum);
  t.set(k::mean, ref::mean);
  t.set(k::causal_mask, ref::causal_mask);
  t.set(k::attention, ref::attention);
  t.set(k::attention_grad, ref::attention_grad);
  t.set(k::embedding_bag, ref::embedding_bag);
  t.set(k::embedding_bag_grad, ref::embedding_bag_grad);
  t.set(k::embedding_bag_sparse_grad, ref::embedding_bag_sparse_grad);
  t.set(k::pairwise_dot, ref::pairwise_dot);
  t.set(k::pairwise_dot_grad, ref::pairwise_dot_grad);
  t.set(k::bce_with_logits, ref::bce_with_logits);
  t.set(k::bce_with_logits_grad, ref::bce_with_logits_grad);
  t.set(k::sum_to, ref::sum_to);
  t.set(k::broadcast_to, ref::broadcast_to);
  t.set(k::relu_grad, ref::relu_grad);
  t.set(k::gelu_grad, ref::gelu_grad);
  t.set(k::tanh_grad, ref::tanh_grad);
  t.set(k::softmax_grad, ref::softmax_grad);
  t.set(k::log_softmax_grad, ref::log_softmax_grad);
  t.set(k::softmax_cross_entropy_grad, ref::softmax_cross_entropy_grad);
  t.set(k::mse_grad, ref::mse_grad);
  t.set(k::layernorm_grad, ref::layernorm_grad);
  t.set(k::embedding_grad, ref::embedding_grad);
  t.set(k::slice_grad, ref::slice_grad);
  return t;
}

dispatch_table cpu_kernels() {
  using k = op_kind;
  dispatch_table t("cpu");
  t.set(k::matmul, cpu::matmul);
  t.set(k::add, cpu::add);
  t.set(k::sub, cpu::sub);
  t.set(k::mul, cpu::mul);
  t.set(k::div, cpu::div);
  t.set(k::bias_add, cpu::bias_add);
  t.set(k::scale, cpu::scale);
  t.set(k::relu, cpu::relu);
  t.set(k::gelu, cpu::gelu);
  t.set(k::tanh, ref::tanh);  // not on any hot path yet
  t.set(k::softmax, cpu::softmax);
  t.set(k::log_softmax, ref::log_softmax);
  t.set(k::softmax_cross_entropy, cpu::softmax_cross_entropy);
  t.set(k::mse, ref::mse);
  t.set(k::layernorm, cpu::layernorm);
  t.set(k::embedding, cpu::embedding);
  t.set(k::reshape, cpu::reshape);
  t.set(k::permute, cpu::permute);
  t.set(k::slice, cpu::slice);
  t.set(k::concat, cpu::concat);
  t.set(k::sum, cpu::sum);
  t.set(k::mean, cpu::mean);
  t.set(k::causal_mask, cpu::causal_mask);
  t.set(k::attention, ref::attention);  // planning large models needs the op; no fast CPU kernel yet
  t.set(k::attention_grad, ref::attention_grad);
  t.set(k::embedding_bag, cpu::embedding_bag);
  t.set(k::embedding_bag_grad, cpu::embedding_bag_grad);
  t.set(k::embedding_bag_sparse_grad, cpu::embedding_bag_sparse_grad);
  t.set(k::pairwise_dot, cpu::pairwise_dot);
  t.set(k::pairwise_dot_grad, cpu::pairwise_dot_grad);
  t.set(k::bce_with_logits, ref::bce_with_logits);  // O(rows): the reference is fast enough
  t.set(k::bce_with_logits_grad, ref::bce_with_logits_grad);
  t.set(k::sum_to, cpu::sum_to);
  t.set(k::broadcast_to, cpu::broadcast_to);
  t.set(k::relu_grad, cpu::relu_grad);
  t.set(k::gelu_grad, cpu::gelu_grad);
  t.set(k::tanh_grad, ref::tanh_grad);
  t.set(k::softmax_grad, cpu::softmax_grad);
  t.set(k::log_softmax_grad, ref::log_softmax_grad);
  t.set(k::softmax_cross_entropy_grad, cpu::softmax_cross_entropy_grad);
  t.set(k::mse_grad, ref::mse_grad);
  t.set(k::layernorm_grad, cpu::layernorm_grad);
  t.set(k::embedding_grad, cpu::embedding_grad);
  t.set(k::slice_grad, cpu::slice_grad);
  return t;
}

}  // namespace cohort::kernels
