// The CUDA backend: device queries, a device float buffer, and float kernels on device
// pointers (ReLU and GELU forward/backward, cuBLAS SGEMM with row-major semantics).
// A plain C++ header (no CUDA headers), so any .cpp can include it. Built only when the
// CUDA toolkit is found (target cohort_kernels_cuda); -DWITH_CUDA=OFF leaves it out.
//
//   namespace cu = cohort::kernels::cuda;
//   if (cu::device_count() == 0) return {};              // no GPU or no driver; never throws
//   const std::int64_t n = 1000;
//   std::vector<float> host_in(n, 1.f), host_out(n);
//   auto x = cu::device_buffer::allocate(n);              // result<device_buffer>
//   auto y = cu::device_buffer::allocate(n);
//   if (!x || !y) return !x ? x.error() : y.error();      // the message says why
//   status st = x->copy_from_host(host_in);               // std::span<const float>, n floats
//   if (st) st = cu::gelu_forward(x->data(), y->data(), n);
//   if (st) st = y->copy_to_host(host_out);               // waits for the kernel
//   if (st) st = cu::sgemm(false, true, 10, 10, 100, x->data(), x->data(), y->data());   // y = X X^T, X [10,100]
//
// Kernels and SGEMM run asynchronously on the legacy default stream; copy_to_host waits for
// them. An error is reported by the call that sees it (a kernel fault, by a later call).
// Error codes: errc::unsupported when no device or driver is usable, errc::invalid_argument
// for bad arguments, errc::io_error for any other CUDA/cuBLAS failure (out of memory, a
// kernel fault); the message names the call and CUDA's text.
#pragma once

#include <cstdint>
#include <span>

#include "graph/error.hpp"

namespace cohort::kernels::cuda {

// -- runtime ------------------------------------------------------------------------------

/// Number of CUDA devices; 0 when there is none, no driver, or any runtime error.
int device_count();

/// cudaGetErrorString of the last CUDA error any function here saw ("no error" if none).
const char* runtime_error_text();

/// ncclGetVersion (e.g. 22809 for 2.28.9; needs no GPU); -1 when built without NCCL.
int nccl_version();

/// An owned array of floats in device memory (cudaMalloc/cudaFree). Move-only.
class device_buffer {
 public:
  device_buffer() = default;
  /// `count` floats, uninitialized; count 0 gives an empty buffer with a null pointer.
  static result<device_buffer> allocate(std::int64_t count);

  ~device_buffer();
  device_buffer(device_buffer&& other) noexcept;
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::int64_t size() const { return size_; }

  /// Copies host.size() floats (must equal size()) to the device.
  status copy_from_host(std::span<const float> host);
  /// Copies size() floats (host.size() must equal size()) back; waits for earlier work.
  status copy_to_host(std::span<float> host) const;

 private:
  float* data_ = nullptr;
  std::int64_t size_ = 0;
};

// -- elementwise (device pointers, n floats) ------------------------------------------------

/// out = max(in, 0). in may equal out.
status relu_forward(const float* in, float* out, std::int64_t n);
/// dx = x > 0 ? dy : 0 (x: the forward input).
status relu_backward(const float* dy, const float* x, float* dx, std::int64_t n);
/// out = 0.5 x (1 + erf(x / sqrt 2)), PyTorch's default GELU.
status gelu_forward(const float* in, float* out, std::int64_t n);
/// dx = dy (Phi(x) + x phi(x)) (x: the forward input).
status gelu_backward(const float* dy, const float* x, float* dx, std::int64_t n);

// -- BLAS -----------------------------------------------------------------------------------

/// C[m,n] = op(A) op(B), all row-major and contiguous, as kernels/cpu/matmul_blas.cpp:
/// A is [m,k] ([k,m] when trans_a), B is [k,n] ([n,k] when trans_b). FP32 math (no TF32),
/// one cuBLAS handle per calling thread, created on first use.
status sgemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b, float* c);

}  // namespace cohort::kernels::cuda
