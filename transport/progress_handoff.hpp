// Who drives a connection's progress: ranks that wait for a message drive it themselves for a
// while (reading frames or polling UCX on their own thread costs microseconds; a hand-off from a
// background thread costs a wake-up, tens of microseconds on a loaded machine), and the
// fabric's background thread drives it when no rank does. The background thread stays out of
// the way while ranks drive, and also for a grace period after a rank got what it waited for
// (ranks of a training step come back for the next message within microseconds; waking the
// background thread between them would take a core from them). When a rank gives up driving
// and goes to sleep on its mailbox, the background thread takes over at once. A background
// thread blocked in poll() when a rank starts driving is interrupted (the fabric's interrupt:
// an eventfd write, ucp_worker_signal), so it never competes with the rank for the data.
//
//   progress_handoff h;
//   std::atomic<bool> stopping{false};
//   std::thread background([&] {
//     while (!stopping) {
//       if (!h.wait_turn(200ms, stopping)) continue;
//       if (h.begin_blocking()) { /* poll(...) */ h.end_blocking(); }   // interrupted by enter()
//       /* drive(): read what arrived */
//     }
//   });
//   h.enter();                 // a rank starts driving
//   /* reads frames itself */
//   h.leave(/*satisfied=*/true);
//   stopping = true;
//   h.wake();
//   background.join();
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace cohort::transport {

class progress_handoff {
 public:
  explicit progress_handoff(std::chrono::microseconds grace = std::chrono::microseconds(5000)) : grace_(grace) {}

  /// How to cut the background thread's blocking wait short (set before any enter()).
  void set_interrupt(std::function<void()> interrupt) { interrupt_ = std::move(interrupt); }

  /// A rank starts driving progress; the background thread keeps out until it leaves (and is
  /// interrupted if it is blocked waiting for the connection).
  void enter() {
    ++driving_;
    if (blocking_ && interrupt_) interrupt_();
  }

  /// The rank stops driving. `satisfied`: it got what it waited for (the background thread
  /// waits out the grace period); otherwise it goes to sleep and the background thread takes
  /// over now.
  void leave(bool satisfied);

  /// For the background thread: true when it should drive progress now (no rank drives, and
  /// one gave up or none has driven for the grace period); false after waiting up to `wait`
  /// for that, or when `stopping` is set.
  bool wait_turn(std::chrono::milliseconds wait, const std::atomic<bool>& stopping);

  /// Wakes the background thread (shutdown, or work only it can do).
  void wake();

  /// The background thread is about to block waiting for the connection: false when a rank
  /// drives now (do not block); otherwise call end_blocking() after the wait.
  bool begin_blocking() {
    blocking_ = true;
    if (driving_ == 0) return true;
    blocking_ = false;
    return false;
  }
  void end_blocking() { blocking_ = false; }

 private:
  using clock = std::chrono::steady_clock;
  const std::chrono::microseconds grace_;
  std::atomic<int> driving_{0};
  std::atomic<clock::rep> last_left_{0};  // when the last satisfied rank left (clock ticks)
  std::atomic<bool> handed_over_{false};  // a rank gave up: the background thread's turn now
  std::atomic<bool> blocking_{false};     // the background thread is blocked waiting for the connection
  std::function<void()> interrupt_;
  std::mutex mutex_;
  std::condition_variable turn_;
};

}  // namespace cohort::transport
