// The UCX data plane across real OS processes on loopback (shared memory or UCX's TCP, as
// UCX picks): the same scenarios as the TCP tests (fabric_scenarios.hpp: bursts, landing
// buffers, collectives with 2 and 4 processes of one and two ranks, closing, misrouted and
// misaddressed frames), and a frame of another generation, which UCX (unlike TCP, whose
// hello refuses a stale peer) can deliver and must refuse. Where UCX cannot start, every
// case says so in a MESSAGE and returns; ctest reports those cases skipped (SKIP_REGULAR_EXPRESSION). A
// refused frame's payload stays in UCX's queue, which UCX notes ("unexpected tag-receive
// descriptor ... was not matched") when the worker closes: expected there.
#include <doctest/doctest.h>

#include <chrono>

#include "fabric_scenarios.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace cohort::test;
using namespace std::chrono_literals;

namespace {

// Asked once (in a child process); every case that cannot run says why.
bool ucx_starts() {
  static const std::string problem = ucx_problem();
  if (!problem.empty()) MESSAGE("UCX unavailable: skipped (" << problem << ")");
  return problem.empty();
}

// A job over UCX whose every process must succeed; skipped (with the MESSAGE) without UCX.
void check_ucx_job(int processes, const scenario& part) {
  if (ucx_starts()) CHECK(job_succeeds(data_plane::ucx, processes, part));
}

}  // namespace

TEST_CASE("a burst of frames of every size over UCX: every message whole") { check_ucx_job(2, run_burst); }

TEST_CASE("messages that come long after their receive began arrive whole over UCX") {
  check_ucx_job(2, run_late_messages);
}

TEST_CASE("recv_landing over UCX: the payload lands in the offered buffer, early and late messages stay whole") {
  check_ucx_job(2, run_landing);
}

TEST_CASE("ring collectives across 2 and 4 OS processes over UCX give the exact sums") {
  for (auto [processes, per_process] : {std::pair{2, 1}, std::pair{4, 1}, std::pair{2, 2}}) {
    CAPTURE(processes);
    CAPTURE(per_process);
    check_ucx_job(processes,
                  [&](data_plane d, job_ports& j, int p) { return run_collectives(d, j, p, processes, per_process); });
  }
}

TEST_CASE("closing a UCX fabric wakes its waiting receive with the reason and fails later calls") {
  check_ucx_job(2, run_closing);
}

TEST_CASE("a UCX frame from or to a rank that does not live where it claims closes the fabric, naming it") {
  check_ucx_job(2, run_misrouted);
  check_ucx_job(2, run_misaddressed);
}

TEST_CASE("a UCX frame of another generation closes the fabric, naming the generation") {
  check_ucx_job(2, [](data_plane d, job_ports& j, int p) {
    return run_refused_frame(d, j, p, {0, 1}, /*generation_of_0=*/2, "process 0: a frame of generation 2");
  });
}
