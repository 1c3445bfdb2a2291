// N ranks as N OS processes: forks one child per rank, runs fn(rank) in it and exits with 0
// (success) or 1 (the error printed on stderr), and returns each child's exit status to the
// test, which asserts from the parent. Listeners opened before the call are inherited, so
// every child knows every port. A child still running after `timeout` is killed (no orphans)
// and reported as -9.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "graph/error.hpp"

namespace cohort::test {

/// Exit codes by rank (0 success; -N: killed by signal N).
inline std::vector<int> spawn_processes(int n, const std::function<status(int rank)>& fn,
                                        std::chrono::seconds timeout = std::chrono::seconds(120)) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      status st = fn(r);
      if (!st) std::fprintf(stderr, "rank %d: %s\n", r, st.error().message.c_str());
      std::fflush(nullptr);
      ::_exit(st ? 0 : 1);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(static_cast<std::size_t>(n), -9);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 0; r < n; ++r) {
    int wstatus = 0;
    for (;;) {
      pid_t done = ::waitpid(pids[static_cast<std::size_t>(r)], &wstatus, WNOHANG);
      if (done == pids[static_cast<std::size_t>(r)]) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
        ::waitpid(pids[static_cast<std::size_t>(r)], &wstatus, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    codes[static_cast<std::size_t>(r)] = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -WTERMSIG(wstatus);
  }
  return codes;
}

}  // namespace cohort::test
