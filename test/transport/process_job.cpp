// Jobs of several OS processes on loopback: listeners, control plane, TCP or UCX data plane.
#include "process_job.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "support/spawn_processes.hpp"
#include "transport/tcp_fabric.hpp"
#include "transport/ucx_fabric.hpp"

namespace cohort::test {

using namespace std::chrono_literals;
using namespace cohort::transport;

const char* name_of(data_plane plane) { return plane == data_plane::tcp ? "tcp" : "ucx"; }

status expect(bool ok, const std::string& what) {
  return ok ? status{} : status(make_error(errc::invalid_argument, what));
}

float value(int r, std::int64_t j) { return static_cast<float>((r + 1) * (j % 13 + 1)); }

job_ports::job_ports(int processes) {
  control = tcp_listener::open("127.0.0.1", 0).value();
  for (int p = 0; p < processes; ++p) data.push_back(tcp_listener::open("127.0.0.1", 0).value());
}

std::vector<int> run_job(int processes, const std::function<status(job_ports&, int process)>& part) {
  job_ports ports(processes);
  return spawn_processes(processes, [&](int p) { return part(ports, p); });
}

result<std::unique_ptr<control_plane>> join_job(job_ports& ports, int process, int world, control_options o) {
  o.world = world;
  o.process = process;
  o.master_port = ports.control.port();
  o.join_timeout = 20s;
  const int data_port = ports.data[static_cast<std::size_t>(process)].port();
  if (process == 0) return control_plane::coordinate(o, std::move(ports.control), data_port);
  return control_plane::join(o, data_port);
}

result<std::shared_ptr<fabric_base>> connect_data(data_plane plane, job_ports& ports, control_plane& cp,
                                                  std::vector<int> process_of_rank, std::uint64_t generation) {
  tcp_fabric_options fo;
  fo.process_of_rank = std::move(process_of_rank);
  fo.process = cp.process();
  for (const auto& n : cp.roster()) fo.peers.push_back({n.host, n.data_port});
  fo.members = cp.members().live;  // after a loss (keep_going): the processes that remain
  fo.generation = generation;
  fo.timeout = 20s;
  if (plane == data_plane::tcp) {
    auto f = tcp_fabric::connect(ports.data[static_cast<std::size_t>(cp.process())], fo);
    if (!f) return f.error();
    return std::shared_ptr<fabric_base>(*f);
  }
  auto f = ucx_fabric::create(fo);
  // every process takes part in the address exchange, even one whose UCX failed
  auto all = cp.all_gather_text(1u << 20, f ? to_hex((*f)->address()) : "-");
  if (!f) return f.error();
  if (!all) return all.error();
  std::vector<std::string> addresses;
  for (std::size_t q = 0; q < all->size(); ++q) {
    if (!fo.members[q]) {  // a process no longer in the job
      addresses.emplace_back();
      continue;
    }
    auto a = from_hex((*all)[q]);
    if (!a) return make_error(errc::io_error, "a process has no UCX address (its UCX did not start)");
    addresses.push_back(std::move(*a));
  }
  if (auto st = (*f)->connect(addresses); !st) return st.error();
  return std::shared_ptr<fabric_base>(*f);
}

result<pair_job> join_pair(data_plane plane, job_ports& ports, int process, std::vector<int> process_of_rank,
                           std::uint64_t generation) {
  auto cp = join_job(ports, process, 2);
  if (!cp) return cp.error();
  auto f = connect_data(plane, ports, **cp, std::move(process_of_rank), generation);
  if (!f) return f.error();
  return pair_job{std::move(*cp), std::move(*f)};
}

std::string ucx_problem() {
  int fds[2];
  if (::pipe(fds) != 0) return "no pipe for the UCX probe";
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    tcp_fabric_options o;
    o.process_of_rank = {0};
    o.peers = {{"127.0.0.1", 0}};
    auto f = ucx_fabric::create(o);
    const std::string why = f ? "" : f.error().message;
    if (!why.empty() && ::write(fds[1], why.data(), why.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string why;
  bool timed_out = false;
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 60000) <= 0) {
      timed_out = true;
      break;
    }
    char buf[256];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // the child is done
    why.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(child, SIGKILL);
  int ws = 0;
  ::waitpid(child, &ws, 0);
  if (timed_out) return "the UCX probe did not finish within 60 s";
  if (!WIFEXITED(ws)) return "the UCX probe died of signal " + std::to_string(WTERMSIG(ws));
  if (WEXITSTATUS(ws) != 0 && why.empty()) return "the UCX probe failed";
  return why;
}

}  // namespace cohort::test
