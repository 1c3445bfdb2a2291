// What every data plane between processes must do, written once and run over TCP
// (tcp_test.cpp) and UCX (ucx_test.cpp). Each function is one process's part of a job of OS
// processes on loopback; it returns the outcome and the test asserts every exit code.
//
//   CHECK(job_succeeds(data_plane::ucx, 2, run_burst));
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "process_job.hpp"

namespace cohort::test {

/// One process's part of a job over a data plane.
using scenario = std::function<status(data_plane plane, job_ports& ports, int process)>;

/// Whether every process of a job of `processes` running `part` over `plane` exited with
/// success (a failing one prints its error on stderr).
bool job_succeeds(data_plane plane, int processes, const scenario& part);

/// Every collective (ring and allreduce()'s pick, 1 to 2^20 + 3 floats; broadcast) between
/// processes * per_process ranks gives the exact sums; the control plane's sum too; the
/// endpoint reports the sizes its fabric promises.
status run_collectives(data_plane plane, job_ports& ports, int process, int processes, int per_process);

/// A burst of frames of every shape (scalars, empty, rank 0 to 3, either side of the TCP
/// look-ahead, a large one between small ones) arrives whole and in order.
status run_burst(data_plane plane, job_ports& ports, int process);

/// Messages that come long after their receive began (past the waiting rank's spin, in the
/// kernel wait) arrive whole and in order, both ways.
status run_late_messages(data_plane plane, job_ports& ports, int process);

/// recv_landing: a payload offered a buffer before it was sent lands in it; one that came
/// first is returned as it came; a wait that timed out leaves its buffer alone.
status run_landing(data_plane plane, job_ports& ports, int process);

/// close(): a waiting receive wakes with errc::closed and the reason, later sends and
/// receives fail the same way; a peer out of range is errc::invalid_argument.
status run_closing(data_plane plane, job_ports& ports, int process);

/// A frame that process 1 must refuse: process 0 sends rank 0 -> rank 1 over fabrics that
/// disagree (process 1's rank map `map_of_1`, process 0's data-plane generation
/// `generation_of_0`); a wait of process 1's last rank fails closed with a reason containing
/// `why`.
status run_refused_frame(data_plane plane, job_ports& ports, int process, std::vector<int> map_of_1,
                         std::uint64_t generation_of_0, const std::string& why);

/// A frame from a process that does not host its source rank closes the receiving fabric,
/// naming the rank and the process (run_refused_frame: process 1 believes it hosts rank 0).
status run_misrouted(data_plane plane, job_ports& ports, int process);
/// A frame for a rank the receiving process does not host closes its fabric, naming the
/// rank (process 1 believes rank 1 lives in process 0, and hosts a rank 2 of its own).
status run_misaddressed(data_plane plane, job_ports& ports, int process);

}  // namespace cohort::test
