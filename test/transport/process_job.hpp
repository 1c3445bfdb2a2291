// Jobs of several OS processes on loopback, for the tests of the data and control planes:
// the listeners a job needs (opened before forking, so every child knows every port),
// joining the control plane, and a TCP or UCX data plane connected over it (UCX addresses
// travel by all_gather_text, as the apps do). Also whether UCX can start here at all.
//
//   auto codes = run_job(2, [](job_ports& ports, int p) -> status {
//     auto job = join_pair(data_plane::ucx, ports, p);     // control plane + fabric, ranks {0, 1}
//     ...
//     return job->control->finish(10s);
//   });                                                    // exit codes: 0 each
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/control_plane.hpp"
#include "transport/fabric_base.hpp"
#include "transport/socket.hpp"

namespace cohort::test {

enum class data_plane { tcp, ucx };
const char* name_of(data_plane plane);

/// An error value naming `what` unless `ok`.
status expect(bool ok, const std::string& what);

/// Rank r's value at index j: exact in float, distinct per rank and index.
float value(int r, std::int64_t j);

struct job_ports {
  transport::tcp_listener control;
  std::vector<transport::tcp_listener> data;
  explicit job_ports(int processes);
};

/// Runs `part` as processes 0..n-1 (forked, once the ports are open); their exit codes
/// (spawn_processes: 0 success, -N killed by signal N).
std::vector<int> run_job(int processes, const std::function<status(job_ports&, int process)>& part);

/// Process `process` of a job of `world`: the coordinator (process 0) or a node.
result<std::unique_ptr<transport::control_plane>> join_job(job_ports& ports, int process, int world,
                                                           transport::control_options o = {});

/// The data plane over a joined control plane. `generation`: the data plane's own (a
/// mismatch tests stale frames); every process must call this (UCX exchanges addresses).
result<std::shared_ptr<transport::fabric_base>> connect_data(data_plane plane, job_ports& ports,
                                                             transport::control_plane& cp,
                                                             std::vector<int> process_of_rank,
                                                             std::uint64_t generation = 1);

/// A job of two processes, one rank each.
struct pair_job {
  std::unique_ptr<transport::control_plane> control;
  std::shared_ptr<transport::fabric_base> fabric;
};
result<pair_job> join_pair(data_plane plane, job_ports& ports, int process, std::vector<int> process_of_rank = {0, 1},
                           std::uint64_t generation = 1);

/// Why UCX cannot start on this machine ("" when it can). Asked in a child process, so the
/// test process itself never initialises UCX.
std::string ucx_problem();

}  // namespace cohort::test
