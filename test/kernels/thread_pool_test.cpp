// The kernel thread pool covers every index exactly once, for any size and pool width.
#include <doctest/doctest.h>

#include <atomic>
#include <vector>

#include "kernels/thread_pool.hpp"

using cohort::kernels::thread_pool;

TEST_CASE("parallel_for visits each index once for sizes 0..257 and pools of 1..4") {
  for (int threads = 1; threads <= 4; ++threads) {
    thread_pool pool(threads);
    CHECK(pool.size() == threads);
    for (std::int64_t n : {0, 1, 2, 3, 7, 64, 257}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      for (int rep = 0; rep < 3; ++rep)
        pool.parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
          for (auto i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
        });
      for (auto& h : hits) CHECK(h.load() == 3);
    }
  }
}

TEST_CASE("a large grain keeps small loops on the calling thread") {
  thread_pool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(100, 1000, [&](std::int64_t b, std::int64_t e) {
    CHECK(b == 0);
    CHECK(e == 100);
    calls.fetch_add(1);
  });
  CHECK(calls.load() == 1);
}
