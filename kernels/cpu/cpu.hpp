// Fast CPU kernels: OpenBLAS GEMM, vectorizable loops, row-parallel work on the kernel
// thread pool. Each is tested against its reference in kernels/reference/. Ops without a
// fast version use the reference kernel (see dispatch.cpp).
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

}  // namespace cohort::kernels::cpu
