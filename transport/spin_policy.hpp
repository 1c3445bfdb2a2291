// How a rank that waits for a message spins — reading its connection or driving UCX on its own
// thread — before it sleeps. Spinning pays while every busy thread has a core: the message
// comes within microseconds and a wake-up would cost tens. It costs a core when the cores are
// contended (a neighbour process, or the very peer we wait for, waiting to run). So a rank
// polls freely for its first 50 microseconds (what a message on a quiet machine takes), and
// after that yields the core between polls: on a quiet machine the yield returns at once, on a
// busy one the thread that wants the core gets it. After its budget the rank sleeps in the
// kernel (tcp_fabric: on the connection itself; ucx_fabric: on its mailbox).
//
//   auto message_here = [] { return true; };                 // a poll of the connection, say
//   bool got = false;
//   const spin_window w(std::chrono::microseconds(1000));   // this wait's budget
//   do {
//     got = message_here();                                  // poll once
//     if (!got) w.pause();                                   // yields once the free spin is over
//   } while (!got && w.active());
//   // not there yet: sleep in the kernel until it comes
#pragma once

#include <chrono>

namespace cohort::transport {

class spin_window {
 public:
  /// Polling without yielding for this long first.
  static constexpr std::chrono::microseconds free_spin{50};

  explicit spin_window(std::chrono::nanoseconds budget)
      : start_(std::chrono::steady_clock::now()), until_(start_ + budget) {}

  /// Still within the budget.
  bool active() const { return std::chrono::steady_clock::now() < until_; }
  /// Between two polls: after the free spin, gives the core to a thread that wants it.
  void pause() const;

 private:
  std::chrono::steady_clock::time_point start_, until_;
};

}  // namespace cohort::transport
