// The hand-off between ranks that drive a connection themselves and the background thread.
#include "transport/progress_handoff.hpp"

namespace cohort::transport {

void progress_handoff::leave(bool satisfied) {
  if (satisfied)
    last_left_.store(clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  else
    handed_over_ = true;
  if (--driving_ == 0 && handed_over_) wake();  // the last driver out wakes it for a rank that sleeps
}

void progress_handoff::wake() {
  std::lock_guard<std::mutex> lock(mutex_);
  turn_.notify_all();
}

bool progress_handoff::wait_turn(std::chrono::milliseconds wait, const std::atomic<bool>& stopping) {
  const auto deadline = clock::now() + wait;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stopping) return false;
    const auto now = clock::now();
    if (driving_ == 0) {
      if (handed_over_.exchange(false)) return true;
      const auto quiet_since = clock::time_point(clock::duration(last_left_.load(std::memory_order_relaxed))) + grace_;
      if (now >= quiet_since) return true;
      if (now >= deadline) return false;
      turn_.wait_until(lock, std::min(deadline, quiet_since));
      continue;
    }
    if (now >= deadline) return false;
    turn_.wait_until(lock, deadline);
  }
}

}  // namespace cohort::transport
