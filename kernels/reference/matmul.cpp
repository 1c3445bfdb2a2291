// Reference matrix multiply: C[p] = op(A[p]) @ op(B[p] or B), triple loop, double accumulator.
#include "kernels/reference/reference.hpp"

namespace cohort::kernels::ref {

status matmul(const kernel_call& c) {
  const auto& at = std::get<matmul_attrs>(c.op.attrs);
  const tensor& a = c.in[0];
  const tensor& b = c.in[1];
  tensor& y = c.out[0];
  std::int64_t m = y.shape().at(-2), n = y.shape().at(-1);
  std::int64_t k = at.trans_a ? a.shape().at(-2) : a.shape().at(-1);
  std::int64_t batches = y.numel() / (m * n);
  bool b_shared = b.shape().rank() == 2;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
  for (std::int64_t p = 0; p < batches; ++p) {
    const float* ap = pa + p * m * k;
    const float* bp = pb + (b_shared ? 0 : p * k * n);
    float* yp = py + p * m * n;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          float av = at.trans_a ? ap[q * m + i] : ap[i * k + q];
          float bv = at.trans_b ? bp[j * k + q] : bp[q * n + j];
          acc += static_cast<double>(av) * bv;
        }
        yp[i * n + j] = static_cast<float>(acc);
      }
  }
  return {};
}

}  // namespace cohort::kernels::ref
