// The CUDA elementwise kernels (ReLU, GELU and their gradients) and their launchers:
// one thread per element over a grid-stride loop, on the legacy default stream.
// Matches the reference kernels of kernels/reference/elementwise.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace cohort::kernels::cuda {
namespace {

constexpr int block_size = 256;
constexpr std::int64_t max_blocks = 65535;  // the grid-stride loop covers the rest
constexpr float inv_sqrt2 = 0.70710678118654752f;
constexpr float inv_sqrt_2pi = 0.39894228040143268f;

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)), written as 0.5 erfc(-x / sqrt 2): the same function,
// without the cancellation of 1 + erf in the negative tail (full float precision there).
__device__ float normal_cdf(float x) { return 0.5f * erfcf(-x * inv_sqrt2); }

__global__ void relu_forward_kernel(const float* in, float* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    float x = in[i];
    out[i] = x > 0.f ? x : 0.f;
  }
}

__global__ void relu_backward_kernel(const float* dy, const float* x, float* dx, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    dx[i] = x[i] > 0.f ? dy[i] : 0.f;
}

__global__ void gelu_forward_kernel(const float* in, float* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    float x = in[i];
    out[i] = x * normal_cdf(x);
  }
}

__global__ void gelu_backward_kernel(const float* dy, const float* x, float* dx, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    float v = x[i];
    float pdf = inv_sqrt_2pi * expf(-0.5f * v * v);
    dx[i] = dy[i] * (normal_cdf(v) + v * pdf);
  }
}

unsigned grid_for(std::int64_t n) {
  return static_cast<unsigned>(std::min(max_blocks, (n + block_size - 1) / block_size));
}

// Launch errors (bad configuration, no device) show up in cudaGetLastError right away.
status launched(const char* what) { return detail::check(cudaGetLastError(), what); }

status bad_count(const char* what, std::int64_t n) {
  return make_error(errc::invalid_argument,
                    std::string("cuda ") + what + ": negative element count " + std::to_string(n));
}

}  // namespace

status relu_forward(const float* in, float* out, std::int64_t n) {
  if (n < 0) return bad_count("relu_forward", n);
  if (n == 0) return {};
  relu_forward_kernel<<<grid_for(n), block_size>>>(in, out, n);
  return launched("relu_forward launch");
}

status relu_backward(const float* dy, const float* x, float* dx, std::int64_t n) {
  if (n < 0) return bad_count("relu_backward", n);
  if (n == 0) return {};
  relu_backward_kernel<<<grid_for(n), block_size>>>(dy, x, dx, n);
  return launched("relu_backward launch");
}

status gelu_forward(const float* in, float* out, std::int64_t n) {
  if (n < 0) return bad_count("gelu_forward", n);
  if (n == 0) return {};
  gelu_forward_kernel<<<grid_for(n), block_size>>>(in, out, n);
  return launched("gelu_forward launch");
}

status gelu_backward(const float* dy, const float* x, float* dx, std::int64_t n) {
  if (n < 0) return bad_count("gelu_backward", n);
  if (n == 0) return {};
  gelu_backward_kernel<<<grid_for(n), block_size>>>(dy, x, dx, n);
  return launched("gelu_backward launch");
}

}  // namespace cohort::kernels::cuda
