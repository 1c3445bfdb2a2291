// Fast CPU kernels: OpenBLAS GEMM, vectorizable loops, row-parallel work on the kernel
// thread pool. Each is tested against its reference in kernels/reference/. Ops without a
// fast version use the reference kernel (see dispatch.cpp).
//
//   node op{op_kind::matmul, matmul_attrs{}, {}, {}, "example"};   // a kernel reads only kind and attrs
//   std::vector<tensor> in{tensor::full({4, 8}, 1.f), tensor::full({8, 2}, 0.5f)};
//   std::vector<tensor> out{tensor::empty({4, 2})};               // pre-allocated, contiguous
//   thread_pool pool(2);
//   if (auto st = cpu::matmul({op, in, out, &pool}); !st) return st;   // out[0] is 4 everywhere
#pragma once

#include "kernels/kernel.hpp"

namespace cohort::kernels::cpu {

status matmul(const kernel_call& c);
status add(const kernel_call& c);
status sub(const kernel_call& c);
status mul(const kernel_call& c);
status div(const kernel_call& c);
status bias_add(const kernel_call& c);
status scale(const kernel_call& c);
status relu(const kernel_call& c);
status relu_grad(const kernel_call& c);
status gelu(const kernel_call& c);
status gelu_grad(const kernel_call& c);
status softmax(const kernel_call& c);
status softmax_grad(const kernel_call& c);
status softmax_cross_entropy(const kernel_call& c);
status softmax_cross_entropy_grad(const kernel_call& c);
status causal_mask(const kernel_call& c);
status layernorm(const kernel_call& c);
status layernorm_grad(const kernel_call& c);
status embedding(const kernel_call& c);
status embedding_grad(const kernel_call& c);
status reshape(const kernel_call& c);
status permute(const kernel_call& c);
status sum(const kernel_call& c);
status mean(const kernel_call& c);
status sum_to(const kernel_call& c);
status broadcast_to(const kernel_call& c);

status embedding_bag(const kernel_call& c);
status embedding_bag_grad(const kernel_call& c);
status embedding_bag_sparse_grad(const kernel_call& c);
status pairwise_dot(const kernel_call& c);
status pairwise_dot_grad(const kernel_call& c);

status concat(const kernel_call& c);
status slice(const kernel_call& c);
status slice_grad(const kernel_call& c);

}  // namespace cohort::kernels::cpu
