// Thread settings for OpenBLAS and cohort's kernels.
#include "kernels/threads.hpp"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>

namespace cohort::kernels {
namespace {
int configured_threads = 1;

// The process's cores as the first caller saw them (before any thread was bound).
const cpu_set_t& process_cores() {
  static const cpu_set_t cores = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) CPU_SET(0, &set);
    return set;
  }();
  return cores;
}
}  // namespace

void set_math_threads(int n) {
  configured_threads = std::max(1, n);
  openblas_set_num_threads(configured_threads);
}

int math_threads() { return configured_threads; }

int available_cores() { return std::max(1, CPU_COUNT(&process_cores())); }

bool pin_current_thread(int slot) {
  const cpu_set_t& cores = process_cores();
  const int count = std::max(1, CPU_COUNT(&cores));
  int wanted = ((slot % count) + count) % count;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &cores)) continue;
    if (wanted-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
  }
  return false;
}

const char* blas_config() { return openblas_get_config(); }

}  // namespace cohort::kernels
