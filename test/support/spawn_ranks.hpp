// N ranks as N threads in one process (gloo's test pattern): runs fn(rank) on N threads,
// joins them inside the calling test case (doctest requires that), and returns each rank's
// status so the test asserts from the main thread.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "graph/error.hpp"

namespace cohort::test {

inline std::vector<status> spawn_ranks(int n, const std::function<status(int rank)>& fn) {
  std::vector<status> results(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { results[static_cast<std::size_t>(r)] = fn(r); });
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace cohort::test
