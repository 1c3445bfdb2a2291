// Private to kernels/cuda/: turns a cudaError_t into a cohort::status and remembers its text
// for runtime_error_text(). Includes the CUDA runtime header, so only the backend's own
// .cpp/.cu files include it.
//
//   void* p = nullptr;
//   const std::size_t bytes = std::size_t{1} << 20;
//   if (auto st = cuda::detail::check(cudaMalloc(&p, bytes), "cudaMalloc"); !st) return st;   // "cudaMalloc: ..."
//   cuda::detail::record(cudaFree(p));            // runtime_error_text() says it if that failed
#pragma once

#include <cuda_runtime_api.h>

#include "graph/error.hpp"

namespace cohort::kernels::cuda::detail {

/// Remembers cudaGetErrorString(e) when e is an error (a success leaves the last text).
void record(cudaError_t e);

/// Ok for cudaSuccess; otherwise records e and returns an error naming `what` and CUDA's text.
status check(cudaError_t e, const char* what);

}  // namespace cohort::kernels::cuda::detail
