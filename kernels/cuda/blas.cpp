// SGEMM through cuBLAS with the row-major semantics of kernels/cpu/matmul_blas.cpp.
// cuBLAS is column-major, and a row-major [r,c] matrix read column-major is its transpose,
// so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: swap the operands and m with n.
// One handle per calling thread (cuBLAS handles are not for concurrent use), made lazily.
#include <cublas_v2.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace cohort::kernels::cuda {
namespace {

status cublas_error(cublasStatus_t s, const char* what) {
  errc code = s == CUBLAS_STATUS_INVALID_VALUE     ? errc::invalid_argument
              : s == CUBLAS_STATUS_NOT_INITIALIZED ? errc::unsupported
                                                   : errc::io_error;
  // cuBLAS failures often come from the runtime underneath: keep its text too.
  detail::record(cudaGetLastError());
  return make_error(
      code, std::string("cuda ") + what + ": " + cublasGetStatusString(s) + " (" + cublasGetStatusName(s) + ")");
}

// The calling thread's handle; creation is retried on the next call when it fails.
class thread_handle {
 public:
  ~thread_handle() {
    if (handle_ != nullptr) cublasDestroy(handle_);
  }
  status get(cublasHandle_t& out) {
    if (handle_ == nullptr) {
      cublasHandle_t h = nullptr;
      if (cublasStatus_t s = cublasCreate(&h); s != CUBLAS_STATUS_SUCCESS) return cublas_error(s, "cublasCreate");
      // Plain FP32: no TF32 tensor-core rounding, so results stay within float error.
      cublasStatus_t s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
      if (s != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h);
        return cublas_error(s, "cublasSetMathMode");
      }
      handle_ = h;
    }
    out = handle_;
    return {};
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace

status sgemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b, float* c) {
  if (m < 0 || n < 0 || k < 0)
    return make_error(errc::invalid_argument, "cuda sgemm: negative extent m=" + std::to_string(m) +
                                                  " n=" + std::to_string(n) + " k=" + std::to_string(k));
  if (m == 0 || n == 0) return {};
  thread_local thread_handle handle;
  cublasHandle_t h = nullptr;
  if (auto st = handle.get(h); !st) return st;
  const float alpha = 1.f, beta = 0.f;
  // Row-major leading dimensions, as cblas_sgemm(CblasRowMajor, ...) takes them.
  const int lda = std::max(1, trans_a ? m : k);
  const int ldb = std::max(1, trans_b ? k : n);
  cublasStatus_t s = cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                 &alpha, b, ldb, a, lda, &beta, c, n);
  if (s != CUBLAS_STATUS_SUCCESS) return cublas_error(s, "cublasSgemm");
  return {};
}

}  // namespace cohort::kernels::cuda
