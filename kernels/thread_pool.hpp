// A fixed pool of worker threads for data-parallel loops inside one kernel. The calling
// thread takes part, so a pool of size N has N-1 workers. Idle workers block on a
// condition variable (they never spin), so they do not steal cores from OpenBLAS's own
// threads between kernels. Work is split statically into at most size() contiguous
// ranges, so a kernel's result does not depend on thread timing.
//
//   thread_pool pool(2);
//   std::vector<float> rows(1000, 2.f);
//   pool.parallel_for(static_cast<std::int64_t>(rows.size()), /*grain=*/64, [&](std::int64_t begin, std::int64_t end) {
//     for (auto r = begin; r < end; ++r) rows[static_cast<std::size_t>(r)] *= 0.5f;
//   });
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace cohort::kernels {

/// A non-owning reference to a callable `void(int64_t, int64_t)`; never allocates.
class range_fn {
 public:
  template <class F>
  range_fn(F& f)  // NOLINT: implicit on purpose
      : obj_(&f), call_([](void* o, std::int64_t b, std::int64_t e) { (*static_cast<F*>(o))(b, e); }) {}
  void operator()(std::int64_t b, std::int64_t e) const { call_(obj_, b, e); }

 private:
  void* obj_;
  void (*call_)(void*, std::int64_t, std::int64_t);
};

class thread_pool {
 public:
  explicit thread_pool(int threads);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(begin, end) over a partition of [0, n) into at most size() ranges of at
  /// least `grain` elements each; returns when all ranges are done. Not reentrant.
  template <class F>
  void parallel_for(std::int64_t n, std::int64_t grain, F&& fn) {
    std::remove_reference_t<F>& f = fn;
    run(n, grain, range_fn(f));
  }

 private:
  void run(std::int64_t n, std::int64_t grain, range_fn fn);
  void worker_loop(int index);
  void run_part(int part);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  // The job being run: valid while remaining_ > 0.
  const range_fn* job_ = nullptr;
  std::int64_t job_n_ = 0;
  int parts_ = 0;
  std::atomic<int> remaining_{0};
};

}  // namespace cohort::kernels
