// The kernel thread pool: static partitioning, blocking waits.
#include "kernels/thread_pool.hpp"

#include <algorithm>

namespace cohort::kernels {

thread_pool::thread_pool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::run_part(int part) {
  std::int64_t begin = job_n_ * part / parts_;
  std::int64_t end = job_n_ * (part + 1) / parts_;
  if (begin < end) (*job_)(begin, end);
}

void thread_pool::run(std::int64_t n, std::int64_t grain, range_fn fn) {
  if (n <= 0) return;
  std::int64_t by_grain = std::max<std::int64_t>(1, n / std::max<std::int64_t>(grain, 1));
  int parts = static_cast<int>(std::min<std::int64_t>(size(), by_grain));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    parts_ = parts;
    remaining_.store(parts - 1);
    ++generation_;
  }
  wake_.notify_all();
  run_part(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return remaining_.load() == 0; });
  job_ = nullptr;
}

void thread_pool::worker_loop(int index) {
  std::uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= parts_) continue;  // this job needs fewer parts than there are workers
    }
    run_part(index);
    if (remaining_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

}  // namespace cohort::kernels
