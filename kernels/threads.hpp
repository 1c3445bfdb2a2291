// One knob for the threads of a process's math: OpenBLAS's pool and cohort's kernel pool
// are sized together, so the two never oversubscribe the cores (--train.threads).
//
//   set_math_threads(std::min(2, available_cores()));   // OpenBLAS uses that many threads from now on
//   thread_pool pool(math_threads());                   // cohort's own kernels use the same count
//   std::puts(blas_config());                           // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
//   pin_current_thread(1);                              // this thread runs on the process's second core only
#pragma once

namespace cohort::kernels {

/// Sets OpenBLAS's thread count (and remembers n for math_threads()). n >= 1.
void set_math_threads(int n);
int math_threads();
/// Cores this process may run on (sched_getaffinity), at least 1.
int available_cores();
/// Binds the calling thread to one core of the process's (first seen) affinity set: the
/// slot-th, modulo their count. False when the system refuses (the thread stays unbound).
bool pin_current_thread(int slot);
/// OpenBLAS's build description, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Cooperlake".
const char* blas_config();

}  // namespace cohort::kernels
