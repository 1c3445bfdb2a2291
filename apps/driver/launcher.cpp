// The local launcher: fork + exec of this same program once per process, the job's exit code,
// and restarts (--launch.max-restarts): when a process of the job fails, the others are
// stopped and the whole job starts again — resuming from the newest checkpoint when it writes
// them (--checkpoint.dir) — and says why; what it lost goes into the summary's "recoveries".
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "apps/driver/processes.hpp"
#include "apps/driver/restarts.hpp"
#include "kernels/threads.hpp"
#include "transport/socket.hpp"

namespace cohort::apps {
namespace {

std::atomic<int> forwarded_signal{0};
void remember_signal(int s) { forwarded_signal = s; }

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by SIG") + (sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
  return "ended";
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// How one attempt of the job ended.
struct attempt_result {
  std::vector<int> codes;
  int first_failure = -1;  // the process that failed first
  std::string first_pid, first_cause;
  bool interrupted = false;               // SIGINT/SIGTERM from the user: never restarted
  double first_end_s = 0, stopped_s = 0;  // steady seconds: the first failure seen, every process gone
};

// --launch.bind-cores: process r of n (a joining process: r >= n, wrapped) on its share of the
// cores this launcher may use: cores r*C/n .. (r+1)*C/n - 1, or core r mod C where n > C.
void bind_to_share(int r, int n) {
  cpu_set_t mine;
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0) return;
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) cores.push_back(c);
  if (cores.empty()) return;
  const int count = static_cast<int>(cores.size());
  const int slot = r % n;
  int first = slot * count / n, last = (slot + 1) * count / n;
  if (last <= first) first = slot % count, last = first + 1;
  cpu_set_t share;
  CPU_ZERO(&share);
  for (int c = first; c < last; ++c) CPU_SET(cores[static_cast<std::size_t>(c)], &share);
  (void)::sched_setaffinity(0, sizeof share, &share);
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

attempt_result run_attempt(char** argv, const std::vector<std::string>& args, const process_options& o, int port,
                           int control_fd, int threads, int attempt, const std::string& notes_path,
                           const std::string& recoveries, std::int64_t& replacements_left) {
  const int n = static_cast<int>(o.nproc);
  const int all = n + static_cast<int>(o.joiners);  // then the processes that join the running job
  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids;
  attempt_result out;
  out.codes.assign(static_cast<std::size_t>(all), -1);
  // process r of the job, a process joining the running job (r >= n), or (replacement) a new
  // process in a lost node's place; -1: fork failed
  // (a replacement after a succession joins the new coordinator: `at_host`:`at_port`)
  auto start_process = [&](int r, bool replacement, const std::string& at_host = {}, int at_port = 0) -> pid_t {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphans if the launcher dies
      if (::getppid() != launcher) ::_exit(1);
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      ::setenv("COHORT_LAUNCHED", "1", 1);
      if (o.bind_cores) bind_to_share(r, n);
      // OpenBLAS starts its pool when loaded, before any option is read; idle pool threads
      // spin (sched_yield) and would take cores from the other processes
      ::setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), 0);
      if (r < n) {
        ::setenv("RANK", std::to_string(r).c_str(), 1);
        ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      } else {  // it joins the running job: --join below, whatever the job's size
        ::unsetenv("RANK");
        ::unsetenv("WORLD_SIZE");
      }
      ::setenv("MASTER_ADDR", (at_port > 0 ? at_host : o.master_addr).c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(at_port > 0 ? at_port : port).c_str(), 1);
      ::setenv("COHORT_ATTEMPT", std::to_string(attempt).c_str(), 1);
      if (replacement) ::setenv("COHORT_REPLACEMENT", "1", 1);
      if (r == 0) ::setenv("COHORT_LAUNCH_STATUS", notes_path.c_str(), 1);
      // where a process that takes over from a lost coordinator says so (the job's verdict is then its)
      ::setenv("COHORT_LAUNCH_LEADER", (notes_path + ".leader").c_str(), 1);
      // the coordinator's port, already listening: handed over, so nothing can take it between
      // the launcher choosing it and the coordinator binding it (a replacement never gets it)
      if (r == 0 && !replacement && control_fd >= 0 && ::fcntl(control_fd, F_SETFD, 0) == 0)
        ::setenv("COHORT_CONTROL_FD", std::to_string(control_fd).c_str(), 1);
      else
        ::unsetenv("COHORT_CONTROL_FD");
      if (!recoveries.empty()) ::setenv("COHORT_RECOVERIES", recoveries.c_str(), 1);
      // one summary on stdout: the coordinator's (with --fault.recover whichever process leads at
      // the end: only it prints one)
      if (r != 0 && !o.recover) {
        int devnull = ::open("/dev/null", O_WRONLY);
        if (devnull >= 0) ::dup2(devnull, STDOUT_FILENO);
      }
      std::vector<char*> cargv;
      cargv.push_back(argv[0]);
      for (auto& a : args) cargv.push_back(const_cast<char*>(a.c_str()));
      std::string join = "--join=" + o.master_addr + ":" + std::to_string(port);
      if (r >= n) cargv.push_back(join.data());
      cargv.push_back(nullptr);
      ::execv("/proc/self/exe", cargv.data());
      std::perror("launch: exec");
      ::_exit(127);
    }
  };
  for (int r = 0; r < all; ++r) {
    const pid_t pid = start_process(r, false);
    if (pid < 0) {
      std::perror("launch: fork");
      for (pid_t p : pids) ::kill(p, SIGKILL);
      out.first_failure = r;
      out.codes[static_cast<std::size_t>(r)] = 1;
      out.interrupted = true;  // nothing to restart into
      return out;
    }
    pids.push_back(pid);
  }
  int alive = all;
  using clock = std::chrono::steady_clock;
  clock::time_point kill_at = clock::time_point::max();
  std::vector<std::pair<pid_t, int>> ended;  // children reaped but not handled yet
  bool first_by_signal = false;
  while (alive > 0) {
    // every child that has ended since the last look, deaths by a signal first: when a killed
    // process and a survivor that exited because of it are both gone, the kernel may hand back
    // the survivor first, and the first failure must name the cause, not its consequence
    if (ended.empty()) {
      for (int status = 0;;) {
        pid_t done = ::waitpid(-1, &status, WNOHANG);
        if (done <= 0) break;
        ended.emplace_back(done, status);
      }
      std::stable_sort(ended.begin(), ended.end(),
                       [](const auto& x, const auto& y) { return WIFSIGNALED(x.second) && !WIFSIGNALED(y.second); });
    }
    if (!ended.empty()) {
      const auto [done, status] = ended.front();
      ended.erase(ended.begin());
      int r = 0;
      while (r < all && pids[static_cast<std::size_t>(r)] != done) ++r;
      if (r == all) continue;
      --alive;
      out.codes[static_cast<std::size_t>(r)] = exit_code_of(status);
      if (out.codes[static_cast<std::size_t>(r)] != 0) {
        // a death by a signal shortly after a plain failure was its cause: the killed process's
        // sockets close before it is a zombie, so the survivor it took down may be reaped first
        const bool by_signal = WIFSIGNALED(status);
        if (out.first_failure < 0 || (by_signal && !first_by_signal && steady_seconds() - out.first_end_s < 0.5)) {
          first_by_signal = by_signal;
          out.first_failure = r;
          out.first_pid = std::to_string(static_cast<int>(done));
          out.first_cause = describe_exit(status);
          out.first_end_s = steady_seconds();
        }
        // the coordinator may have failed already without being reaped (its death took this node
        // down): then nobody goes on. Its files close before it is a zombie, so a node may see
        // that first: it gets 50 ms to show. (Ended well — a short job that went on without this
        // node and finished — does not count.)
        auto coordinator_failed = [&] {
          if (out.codes[0] >= 0) return out.codes[0] != 0;
          siginfo_t c{};
          return ::waitid(P_PID, static_cast<id_t>(pids[0]), &c, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                 c.si_pid == pids[0] && !(c.si_code == CLD_EXITED && c.si_status == 0);
        };
        bool coordinator_ended = coordinator_failed();
        for (int i = 0; i < 50 && r != 0 && o.recover && !coordinator_ended; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          coordinator_ended = coordinator_failed();
        }
        // with --fault.recover and 3 or more processes a lost coordinator has a successor
        // (control_succession.cpp): the others go on, or end themselves without a majority
        const bool succeeded = r == 0 && o.recover && n >= 3;
        std::fprintf(stderr, "launch: %s %d (pid %d) %s%s\n", r < n ? "process" : "joining process", r < n ? r : r - n,
                     static_cast<int>(done), describe_exit(status).c_str(),
                     succeeded ? "; the next process takes over as the coordinator if a majority of the job reaches it"
                     : o.recover && r != 0 && !coordinator_ended ? "; the others go on without it (--fault.recover)"
                                                                 : "");
        // the coordinator reports what it saw; give it time when a node went first (with
        // --fault.recover the job goes on: nothing to stop)
        const auto grace =
            r == 0 ? std::chrono::milliseconds(2000) : std::chrono::milliseconds(o.heartbeat_timeout_ms + 5000);
        if ((r == 0 && !succeeded) || !o.recover) kill_at = std::min(kill_at, clock::now() + grace);
        // --fault.replace-wait-ms: a new process takes the lost node's place in the running job
        // (after a succession, at the new coordinator's standby port; a lost coordinator's place
        // is not taken)
        const launch_leader lead = read_launch_leader(notes_path + ".leader", n);
        const bool to_successor = coordinator_ended && o.recover && n >= 3 && lead.process > 0 && lead.port > 0 &&
                                  r != lead.process && out.codes[static_cast<std::size_t>(lead.process)] < 0;
        if (r != 0 && r < n && o.recover && o.replace_wait_ms > 0 && (!coordinator_ended || to_successor) &&
            replacements_left > 0 && forwarded_signal.load() == 0) {
          const pid_t pid = to_successor ? start_process(r, true, lead.host, lead.port) : start_process(r, true);
          if (pid > 0) {
            --replacements_left;
            pids[static_cast<std::size_t>(r)] = pid;
            out.codes[static_cast<std::size_t>(r)] = -1;
            ++alive;
            std::fprintf(stderr, "launch: started pid %d to take process %d's place (%lld replacement%s left)\n",
                         static_cast<int>(pid), r, static_cast<long long>(replacements_left),
                         replacements_left == 1 ? "" : "s");
          }
        }
      }
      if (r == 0 && !(out.codes[0] != 0 && o.recover && n >= 3))  // the nodes follow the coordinator at once (one
                                                                  // fenced out may never: it is stopped)
        kill_at = std::min(kill_at, clock::now() + std::chrono::milliseconds(out.codes[0] != 0 ? 2000
                                                                             : o.recover       ? 3000
                                                                                               : 15000));
      continue;
    }
    if (int s = forwarded_signal.exchange(0); s != 0) {
      out.interrupted = true;
      for (int r = 0; r < all; ++r)
        if (out.codes[static_cast<std::size_t>(r)] < 0) ::kill(pids[static_cast<std::size_t>(r)], s);
      kill_at = std::min(kill_at, clock::now() + std::chrono::seconds(10));
    }
    if (clock::now() >= kill_at) {
      for (int r = 0; r < all; ++r)
        if (out.codes[static_cast<std::size_t>(r)] < 0) {
          std::fprintf(stderr, "launch: stopping process %d (pid %d)\n", r,
                       static_cast<int>(pids[static_cast<std::size_t>(r)]));
          ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
        }
      kill_at = clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  out.stopped_s = steady_seconds();
  return out;
}

int job_exit_code(const attempt_result& a, bool recover, int leader) {
  // with --fault.recover the coordinator's verdict is the job's: process 0's, or its successor's
  if (recover && leader > 0) return a.codes[static_cast<std::size_t>(leader)];
  if (a.codes[0] != 0 || recover) return a.codes[0];
  return a.first_failure < 0 ? 0 : a.codes[static_cast<std::size_t>(a.first_failure)];
}

}  // namespace

int launch_processes(int argc, char** argv, const process_options& o, const option_set& opts,
                     const std::string& checkpoint_dir) {
  const int n = static_cast<int>(o.nproc);
  const bool port_given = opts.was_set("dist.master-port") || std::getenv("MASTER_PORT") != nullptr;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--launch.nproc", 14) != 0 && std::strncmp(argv[i], "--launch.max-restarts", 21) != 0 &&
        std::strncmp(argv[i], "--launch.joiners", 16) != 0 && std::strncmp(argv[i], "--launch.bind-cores", 19) != 0)
      args.push_back(argv[i]);
  const int threads = std::max(1, kernels::available_cores() / n);
  if (opts.has("train.threads") && !opts.was_set("train.threads"))
    args.push_back("--train.threads=" + std::to_string(threads));
  std::signal(SIGINT, remember_signal);
  std::signal(SIGTERM, remember_signal);
  const std::string notes_path =
      (std::filesystem::temp_directory_path() / ("cohort-launch-" + std::to_string(::getpid()) + ".json")).string();
  json recoveries = json::array();
  std::int64_t replacements_left = o.max_restarts;  // replacements share the restarts' budget
  for (int attempt = 0;; ++attempt) {
    int port = static_cast<int>(o.master_port);
    std::optional<transport::tcp_listener> control;  // a free port for this attempt, listening already
    if (!port_given)
      if (auto l = transport::tcp_listener::open(o.bind, 0); l) {
        port = l->port();
        control.emplace(std::move(*l));
      }
    std::filesystem::remove(notes_path);
    std::filesystem::remove(notes_path + ".leader");
    const auto a = run_attempt(argv, args, o, port, control ? control->fd() : -1, threads, attempt, notes_path,
                               recoveries.empty() ? std::string() : recoveries.dump(), replacements_left);
    control.reset();
    const attempt_notes notes = read_launch_notes(notes_path);
    const int leader = read_launch_leader(notes_path + ".leader", n).process;
    std::filesystem::remove(notes_path);
    std::filesystem::remove(notes_path + ".leader");
    if (!recoveries.empty() && notes.first_step_unix_s > 0 && recoveries.back().contains("stopped_unix_s")) {
      // this attempt's first step closes the previous recovery (the last one the attempt itself reports)
      recoveries.back()["recover_s"] = notes.first_step_unix_s - recoveries.back()["stopped_unix_s"].get<double>();
    }
    const int code = job_exit_code(a, o.recover, leader);
    if (code == 0 || a.interrupted || code == 2 || attempt >= o.max_restarts) {
      if (code != 0 && !a.interrupted && code != 2 && o.max_restarts > 0)
        std::fprintf(stderr, "launch: process %d %s; no restart left (--launch.max-restarts=%lld)\n", a.first_failure,
                     a.first_cause.c_str(), static_cast<long long>(o.max_restarts));
      return code;
    }
    json r = {{"lost", "process " + std::to_string(a.first_failure) + " (pid " + a.first_pid + ")"},
              {"cause", a.first_cause},
              {"detect_s", a.stopped_s - a.first_end_s},
              {"source", "restart"},
              {"stopped_unix_s", unix_seconds()}};
    if (notes.failed_step >= 0) r["step"] = notes.failed_step;
    if (!notes.plan.empty()) r["plan_before"] = notes.plan;
    if (!notes.error.empty()) r["error"] = notes.error;
    if (!recoveries.empty()) recoveries.back().erase("stopped_unix_s");
    recoveries.push_back(r);
    std::fprintf(stderr, "launch: process %d %s; restarting all %d processes (restart %d of %lld) %s\n",
                 a.first_failure, a.first_cause.c_str(), n, attempt + 1, static_cast<long long>(o.max_restarts),
                 checkpoint_dir.empty() ? "from the start (no --checkpoint.dir)"
                                        : ("from the newest checkpoint in " + checkpoint_dir).c_str());
  }
}

}  // namespace cohort::apps
