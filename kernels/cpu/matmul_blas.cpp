// Matrix multiply through OpenBLAS's cblas_sgemm, one call per batch entry (one call in
// all when B is shared and A is not transposed: the batch folds into M).
#include <cblas.h>

#include "kernels/cpu/cpu.hpp"

namespace cohort::kernels::cpu {

status matmul(const kernel_call& c) {
  const auto& at = std::get<matmul_attrs>(c.op.attrs);
  const tensor& a = c.in[0];
  const tensor& b = c.in[1];
  tensor& y = c.out[0];
  int m = static_cast<int>(y.shape().at(-2));
  int n = static_cast<int>(y.shape().at(-1));
  int k = static_cast<int>(at.trans_a ? a.shape().at(-2) : a.shape().at(-1));
  std::int64_t batches = y.numel() / (static_cast<std::int64_t>(m) * n);
  bool b_shared = b.shape().rank() == 2;
  if (b_shared && !at.trans_a && batches > 1) {  // [P*M, K] @ [K, N]
    m = static_cast<int>(m * batches);
    batches = 1;
  }
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
  const int lda = at.trans_a ? m : k;
  const int ldb = at.trans_b ? k : n;
  if (m == 0 || n == 0) return {};
  for (std::int64_t p = 0; p < batches; ++p) {
    cblas_sgemm(CblasRowMajor, at.trans_a ? CblasTrans : CblasNoTrans, at.trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                1.0f, pa + p * static_cast<std::int64_t>(m) * k, lda,
                pb + (b_shared ? 0 : p * static_cast<std::int64_t>(k) * n), ldb, 0.0f,
                py + p * static_cast<std::int64_t>(m) * n, n);
  }
  return {};
}

}  // namespace cohort::kernels::cpu
