// Thread settings for OpenBLAS and cohort's kernels.
#include "kernels/threads.hpp"

#include <cblas.h>
#include <sched.h>

#include <algorithm>

namespace cohort::kernels {
namespace {
int configured_threads = 1;
}

void set_math_threads(int n) {
  configured_threads = std::max(1, n);
  openblas_set_num_threads(configured_threads);
}

int math_threads() { return configured_threads; }

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

const char* blas_config() { return openblas_get_config(); }

}  // namespace cohort::kernels
