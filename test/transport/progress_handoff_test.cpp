// progress_handoff: when the background thread may drive a connection (no rank drives it, and
// one gave up or none did for the grace period), and that a rank entering interrupts it.
#include <doctest/doctest.h>

#include <future>
#include <thread>

#include "transport/progress_handoff.hpp"

using namespace cohort::transport;
using namespace std::chrono_literals;

TEST_CASE("the background thread may drive a connection nobody has driven") {
  progress_handoff h(5000us);
  std::atomic<bool> stopping{false};
  CHECK(h.wait_turn(0ms, stopping));
}

TEST_CASE("while a rank drives, the background thread waits, a rank that gives up hands over at once") {
  progress_handoff h(std::chrono::microseconds(10'000'000));  // a grace period no test waits out
  std::atomic<bool> stopping{false};
  h.enter();
  CHECK_FALSE(h.wait_turn(20ms, stopping));
  std::promise<void> waiting;
  std::thread rank([&] {
    waiting.get_future().wait();  // the background thread is (about to be) waiting for its turn
    h.leave(/*satisfied=*/false);
  });
  waiting.set_value();
  // true only through the hand-over (a rank drives until then): seen at once if it came
  // first, woken by it if it comes during the wait; never the 10 s timeout
  CHECK(h.wait_turn(10s, stopping));
  rank.join();
}

TEST_CASE("after a rank got its message the background thread waits out the grace period") {
  progress_handoff h(std::chrono::microseconds(10'000'000));
  std::atomic<bool> stopping{false};
  h.enter();
  h.leave(/*satisfied=*/true);
  CHECK_FALSE(h.wait_turn(30ms, stopping));  // within the grace period: not its turn

  progress_handoff quick(1000us);
  quick.enter();
  quick.leave(/*satisfied=*/true);
  CHECK(quick.wait_turn(10s, stopping));  // the grace period ends well before 10 s
}

TEST_CASE("a hand-over by one of two driving ranks waits for the other to leave") {
  progress_handoff h(std::chrono::microseconds(10'000'000));
  std::atomic<bool> stopping{false};
  h.enter();
  h.enter();
  h.leave(/*satisfied=*/false);  // this rank sleeps; the other still drives
  CHECK_FALSE(h.wait_turn(20ms, stopping));
  h.leave(/*satisfied=*/true);  // the last driver out: the sleeper needs the background thread
  CHECK(h.wait_turn(0ms, stopping));
}

TEST_CASE("a rank that starts driving interrupts a blocked background thread, and only then") {
  progress_handoff h;
  std::atomic<int> interrupts{0};
  h.set_interrupt([&] { ++interrupts; });
  h.enter();
  h.leave(true);
  CHECK(interrupts == 0);  // not blocked: no interrupt
  REQUIRE(h.begin_blocking());
  h.enter();
  CHECK(interrupts == 1);
  h.end_blocking();
  CHECK_FALSE(h.begin_blocking());  // a rank drives: do not block
  h.leave(true);
}

TEST_CASE("stopping ends the wait") {
  progress_handoff h;
  std::atomic<bool> stopping{true};
  h.enter();
  CHECK_FALSE(h.wait_turn(10s, stopping));
}
