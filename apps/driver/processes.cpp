// The process options and the local launcher (fork + exec of this same program).
#include "apps/driver/processes.hpp"

#include "apps/driver/control_keys.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/threads.hpp"
#include "planner/rank_layout.hpp"
#include "transport/auth.hpp"
#include "transport/socket.hpp"
#include "transport/ucx_fabric.hpp"

namespace cohort::apps {
namespace {

std::atomic<int> forwarded_signal{0};
void remember_signal(int s) { forwarded_signal = s; }

result<std::int64_t> env_int(const char* name) {
  const char* v = std::getenv(name);
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != 0)
    return make_error(errc::invalid_argument, std::string(name) + "=" + v + " is not an integer");
  return static_cast<std::int64_t>(x);
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by SIG") + (sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
  return "ended";
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

const char* to_string(data_plane d) { return d == data_plane::tcp ? "tcp" : "ucx"; }

void process_options::add_to(option_set& opts) {
  opts.add("launch.nproc", nproc, "start this many processes of this app on this machine and train across them")
      .add("join", join, "join the job whose coordinator listens at HOST:PORT (a node; rank from RANK or join order)")
      .add("dist.rank", rank, "this process's rank in the job, 0 the coordinator ($RANK when not given)")
      .add("dist.world", world, "processes in the job ($WORLD_SIZE when not given)")
      .add("dist.master-addr", master_addr, "the coordinator's address ($MASTER_ADDR when not given)")
      .add("dist.master-port", master_port, "the coordinator's port ($MASTER_PORT when not given)")
      .add("dist.bind", bind, "the address this process listens on; anything but loopback needs the job secret")
      .add("dist.transport", transport_text,
           "the data plane: tcp (authenticated) or ucx (shared memory on one host; "
           "unauthenticated: an isolated network only)")
      .add("dist.heartbeat-ms", heartbeat_ms, "heartbeat interval between the coordinator and every node")
      .add("dist.heartbeat-timeout-ms", heartbeat_timeout_ms,
           "a node silent this long is lost (a stopped or hung process)")
      .add("dist.join-timeout-ms", join_timeout_ms, "how long the coordinator waits for every node to join")
      .add("fault.signal", signal, "test hook: KILL or STOP: process --fault.signal-rank raises it ...")
      .add("fault.signal-rank", signal_rank, "... this process ...")
      .add("fault.signal-step", signal_step, "... after this step (1-based)");
}

status process_options::finish(const option_set& opts) {
  const bool launched = std::getenv("COHORT_LAUNCHED") != nullptr;
  if (launched) nproc = 0;  // a child of the launcher never launches again
  if (!opts.was_set("dist.rank") && std::getenv("RANK")) {
    auto r = env_int("RANK");
    if (!r) return r.error();
    rank = *r;
  }
  if (!opts.was_set("dist.world") && std::getenv("WORLD_SIZE")) {
    auto w = env_int("WORLD_SIZE");
    if (!w) return w.error();
    world = *w;
  }
  if (!opts.was_set("dist.master-addr") && std::getenv("MASTER_ADDR")) master_addr = std::getenv("MASTER_ADDR");
  if (!opts.was_set("dist.master-port") && std::getenv("MASTER_PORT")) {
    auto p = env_int("MASTER_PORT");
    if (!p) return p.error();
    master_port = *p;
  }
  if (!join.empty()) {
    const auto colon = join.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return make_error(errc::invalid_argument, "--join must be HOST:PORT, got '" + join + "'");
    master_addr = join.substr(0, colon);
    char* end = nullptr;
    master_port = std::strtoll(join.c_str() + colon + 1, &end, 10);
    if (*end != 0) return make_error(errc::invalid_argument, "--join must be HOST:PORT, got '" + join + "'");
    if (rank == 0) return make_error(errc::invalid_argument, "--join is for nodes; rank 0 is the coordinator");
    if (world < 2)
      return make_error(errc::invalid_argument, "--join needs the job's size: --dist.world=N (or WORLD_SIZE)");
  }
  if (nproc < 0 || nproc > 64) return make_error(errc::invalid_argument, "--launch.nproc must be between 0 and 64");
  if (world < 1) return make_error(errc::invalid_argument, "--dist.world (WORLD_SIZE) must be at least 1");
  if (world > 1 && join.empty() && (rank < 0 || rank >= world))
    return make_error(errc::invalid_argument, "a job of " + std::to_string(world) +
                                                  " processes needs RANK (or --dist.rank) in 0.." +
                                                  std::to_string(world - 1) + ", or --join");
  if (world == 1) rank = -1;
  if (master_port < 1 || master_port > 65535)
    return make_error(errc::invalid_argument, "--dist.master-port (MASTER_PORT) must be in 1..65535");
  if (heartbeat_ms < 1 || heartbeat_timeout_ms <= heartbeat_ms)
    return make_error(errc::invalid_argument,
                      "--dist.heartbeat-timeout-ms must exceed --dist.heartbeat-ms (both positive)");
  if (transport_text == "tcp")
    transport = data_plane::tcp;
  else if (transport_text == "ucx")
    transport = data_plane::ucx;
  else
    return make_error(errc::invalid_argument, "--dist.transport must be tcp or ucx, got '" + transport_text + "'");
  if (!signal.empty() && signal != "KILL" && signal != "STOP")
    return make_error(errc::invalid_argument, "--fault.signal must be KILL or STOP, got '" + signal + "'");
  return {};
}

std::vector<int> process_group::owners(const planner::parallel_plan& plan) const {
  return planner::rank_layout(plan).process_of_rank(world());
}

result<std::shared_ptr<transport::fabric>> process_group::connect(const planner::parallel_plan& plan) {
  const int ranks = plan.ranks();
  if (ranks % world() != 0)
    return make_error(errc::invalid_argument, "a plan of " + std::to_string(ranks) +
                                                  " ranks cannot be split evenly over " + std::to_string(world()) +
                                                  " processes");
  transport::tcp_fabric_options fo;
  fo.process_of_rank = owners(plan);
  fo.process = process();
  for (const auto& n : control->roster()) fo.peers.push_back({n.host, n.data_port});
  fo.secret = secret;
  fo.timeout = std::chrono::milliseconds(options.join_timeout_ms);
  if (options.transport == data_plane::ucx) {
    auto f = transport::ucx_fabric::create(fo);
    // every process takes part in the address exchange, even one whose UCX failed
    auto all = control->all_gather_text(key(control_key::ucx_addresses), f ? transport::to_hex((*f)->address()) : "-");
    if (!f) return f.error();
    if (!all) return all.error();
    std::vector<std::string> addresses;
    for (int p = 0; p < world(); ++p) {
      auto a = transport::from_hex((*all)[static_cast<std::size_t>(p)]);
      if (!a)
        return make_error(errc::io_error,
                          "process " + std::to_string(p) + " has no UCX address (its UCX did not start)");
      addresses.push_back(std::move(*a));
    }
    if (auto st = (*f)->connect(addresses); !st) return st.error();
    return std::shared_ptr<transport::fabric>(*f);
  }
  auto f = transport::tcp_fabric::connect(data, fo);
  if (!f) return f.error();
  return std::shared_ptr<transport::fabric>(*f);
}

result<std::unique_ptr<process_group>> form_process_group(const process_options& o) {
  auto g = std::make_unique<process_group>();
  g->options = o;
  auto secret = transport::load_job_secret();
  if (!secret) return secret.error();
  g->secret = *secret;
  if (!transport::is_loopback(o.bind) && g->secret.empty())
    return make_error(errc::invalid_argument, "--dist.bind=" + o.bind +
                                                  " listens beyond this machine: set a job secret first "
                                                  "(COHORT_JOB_SECRET_FILE=F with chmod 600 F, or COHORT_JOB_SECRET)");
  auto data = transport::tcp_listener::open(o.bind, 0);
  if (!data) return data.error();
  g->data = std::move(*data);
  transport::control_options c;
  c.world = static_cast<int>(o.world);
  c.process = o.join.empty() ? static_cast<int>(o.rank) : (o.rank > 0 ? static_cast<int>(o.rank) : -1);
  c.master_host = o.master_addr;
  c.master_port = static_cast<int>(o.master_port);
  c.secret = g->secret;
  c.heartbeat = std::chrono::milliseconds(o.heartbeat_ms);
  c.heartbeat_timeout = std::chrono::milliseconds(o.heartbeat_timeout_ms);
  c.join_timeout = std::chrono::milliseconds(o.join_timeout_ms);
  c.cores = kernels::available_cores();
  result<std::unique_ptr<transport::control_plane>> cp = make_error(errc::closed, "not started");
  if (c.process == 0) {
    auto l = transport::tcp_listener::open(o.bind, c.master_port);
    if (!l) return make_error(l.error().code, "the coordinator's port: " + l.error().message);
    cp = transport::control_plane::coordinate(c, std::move(*l), g->data.port());
  } else {
    cp = transport::control_plane::join(c, g->data.port());
  }
  if (!cp) return cp.error();
  g->control = std::move(*cp);
  return g;
}

int launch_processes(int argc, char** argv, const process_options& o, const option_set& opts) {
  const int n = static_cast<int>(o.nproc);
  int port = static_cast<int>(o.master_port);
  if (!opts.was_set("dist.master-port") && std::getenv("MASTER_PORT") == nullptr) {
    // a free port for this job (the coordinator binds it right away)
    if (auto l = transport::tcp_listener::open("127.0.0.1", 0); l) port = l->port();
  }
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--launch.nproc", 14) != 0) args.push_back(argv[i]);
  const int threads = std::max(1, kernels::available_cores() / n);
  if (opts.has("train.threads") && !opts.was_set("train.threads"))
    args.push_back("--train.threads=" + std::to_string(threads));
  std::signal(SIGINT, remember_signal);
  std::signal(SIGTERM, remember_signal);
  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("launch: fork");
      for (pid_t p : pids) ::kill(p, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphans if the launcher dies
      if (::getppid() != launcher) ::_exit(1);
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      ::setenv("COHORT_LAUNCHED", "1", 1);
      // OpenBLAS starts its pool when loaded, before any option is read; idle pool threads
      // spin (sched_yield) and would take cores from the other processes
      ::setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), 0);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      if (r != 0) {  // one summary on stdout: the coordinator's
        int devnull = ::open("/dev/null", O_WRONLY);
        if (devnull >= 0) ::dup2(devnull, STDOUT_FILENO);
      }
      std::vector<char*> cargv;
      cargv.push_back(argv[0]);
      for (auto& a : args) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execv("/proc/self/exe", cargv.data());
      std::perror("launch: exec");
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(static_cast<std::size_t>(n), -1);
  int alive = n, first_failure = -1;
  using clock = std::chrono::steady_clock;
  clock::time_point kill_at = clock::time_point::max();
  while (alive > 0) {
    int status = 0;
    pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      int r = 0;
      while (r < n && pids[static_cast<std::size_t>(r)] != done) ++r;
      if (r == n) continue;
      --alive;
      codes[static_cast<std::size_t>(r)] = exit_code_of(status);
      if (codes[static_cast<std::size_t>(r)] != 0) {
        if (first_failure < 0) first_failure = r;
        std::fprintf(stderr, "launch: process %d (pid %d) %s\n", r, static_cast<int>(done),
                     describe_exit(status).c_str());
        // the coordinator reports what it saw; give it time when a node went first
        const auto grace =
            r == 0 ? std::chrono::milliseconds(2000) : std::chrono::milliseconds(o.heartbeat_timeout_ms + 5000);
        kill_at = std::min(kill_at, clock::now() + grace);
      }
      if (r == 0) kill_at = std::min(kill_at, clock::now() + std::chrono::milliseconds(codes[0] == 0 ? 15000 : 2000));
      continue;
    }
    if (int s = forwarded_signal.exchange(0); s != 0) {
      for (int r = 0; r < n; ++r)
        if (codes[static_cast<std::size_t>(r)] < 0) ::kill(pids[static_cast<std::size_t>(r)], s);
      kill_at = std::min(kill_at, clock::now() + std::chrono::seconds(10));
    }
    if (clock::now() >= kill_at) {
      for (int r = 0; r < n; ++r)
        if (codes[static_cast<std::size_t>(r)] < 0) {
          std::fprintf(stderr, "launch: stopping process %d (pid %d)\n", r,
                       static_cast<int>(pids[static_cast<std::size_t>(r)]));
          ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
        }
      kill_at = clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (codes[0] != 0) return codes[0];
  return first_failure < 0 ? 0 : codes[static_cast<std::size_t>(first_failure)];
}

}  // namespace cohort::apps
