// The process options and forming a job's process group (the launcher: launcher.cpp).
#include "apps/driver/processes.hpp"

#include "apps/driver/control_keys.hpp"
#include "apps/driver/slurm.hpp"

#include <fcntl.h>
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
#include <thread>
#include <vector>

#include "kernels/threads.hpp"
#include "planner/rank_layout.hpp"
#include "transport/auth.hpp"
#include "transport/socket.hpp"
#include "transport/ucx_fabric.hpp"

namespace cohort::apps {
namespace {

result<std::int64_t> env_int(const char* name) {
  const char* v = std::getenv(name);
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != 0)
    return make_error(errc::invalid_argument, std::string(name) + "=" + v + " is not an integer");
  return static_cast<std::int64_t>(x);
}

}  // namespace

const char* to_string(data_plane d) { return d == data_plane::tcp ? "tcp" : "ucx"; }

void process_options::add_to(option_set& opts) {
  opts.add("launch.nproc", nproc, "start this many processes of this app on this machine and train across them")
      .add("join", join,
           "join the job whose coordinator listens at HOST:PORT: with --dist.world (or WORLD_SIZE) as a node of its "
           "start (rank from RANK or join order); without, the running job, whatever its size, at its next step "
           "boundary (it was started with --elastic.max-procs)")
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
      .add("fault.recover", recover,
           "keep training when a node process is lost: the others take over its ranks, restored from a "
           "data-parallel replica or a buddy copy (--fault.replicas), and redo only the interrupted step "
           "(the coordinator too, with 3 or more processes: the next one takes over once a majority reaches it); "
           "a node that gets SIGTERM leaves in good order at the next step")
      .add("fault.replan", replan,
           "after a recovered loss: auto (the planner re-plans for the processes that remain when it chose "
           "the plan; a plan the user gave is kept), always (the planner re-plans whatever the first plan "
           "was), keep (the lost ranks run on the processes that remain)")
      .add("fault.replace-wait-ms", replace_wait_ms,
           "with --fault.recover: after a lost node wait this long for a replacement to take its place "
           "(the plan and placement then stay; the launcher starts one for every node process that dies, "
           "while --launch.max-restarts allows; after the coordinator's loss it joins the new coordinator, and "
           "nobody takes the lost coordinator's own place); 0: the others take over at once")
      .add("fault.replicas", replicas,
           "with --fault.recover: 1 keeps a buddy copy of every piece that has no data-parallel replica "
           "on another process (a pipeline stage, a tensor-parallel rank, a sharded piece) on the next "
           "process, exact at every commit, so its loss costs one step; 0: such a loss falls back on the "
           "newest checkpoint")
      .add("dist.replacement", replacement,
           "this node joins a running job in a lost process's place ($COHORT_REPLACEMENT=1; the launcher sets it)")
      .add("launch.max-restarts", max_restarts,
           "when a process fails, restart the whole job this many times at most, from the newest checkpoint")
      .add("elastic.leave-after", leave_after,
           "with --fault.recover: the node --elastic.leave-rank leaves the running job in good order after "
           "this many steps, as a node does on SIGTERM (its state moves to the others, no step redone, it "
           "exits 0); 0: never")
      .add("elastic.leave-rank", leave_rank, "... the node (1..N-1) that leaves")
      .add("elastic.max-procs", max_procs,
           "with --fault.recover: the job may grow to this many processes: a process started with "
           "--join=HOST:PORT (no --dist.world) while it runs is admitted at the next step boundary when "
           "--elastic.scale-out allows; one beyond this waits as a spare until a process is lost or leaves; "
           "0: the job's size (it cannot grow)")
      .add("elastic.min-procs", min_procs,
           "with --fault.recover: the fewest processes the job goes on with; a loss or a leave below it ends the "
           "job (the launcher's restart from the newest checkpoint, where allowed)")
      .add("elastic.batch", batch_mode,
           "fixed: every plan the job changes to trains --train.batch samples a step at --train.lr (the loss "
           "curve of a job that grows or shrinks is the fixed-size run's); scale: --train.batch is the first "
           "plan's, and a plan of dp data-parallel replicas trains --train.batch x dp / (the first plan's dp) "
           "samples at --train.lr times that over --train.batch (the linear rule: more throughput)")
      .add("elastic.scale-out", scale_out,
           "when processes wait to join: auto (the job grows when the cost model predicts the time saved over "
           "the steps left exceeds the transition's cost; the decision and both predictions are logged), "
           "always, never (they wait as spares)")
      .add("elastic.join-after", join_after,
           "test hook: the job takes processes waiting to join only after this step, and waits there (up to half "
           "--dist.join-timeout-ms) for as many as fill --elastic.max-procs (a coordinator that took over: at its "
           "first step boundary after it); 0: whenever they come")
      .add("elastic.straggler-factor", straggler_factor,
           "with --fault.recover: a process whose forward and backward seconds per rank, the median over the last "
           "--elastic.straggler-steps steps, are above this many times its peers' (the median of the others') is a "
           "straggler: process 0 moves one of "
           "its ranks to the process where the step is predicted shortest, at the next step boundary; 0: off")
      .add("elastic.straggler-steps", straggler_steps,
           "... over this many steps (a median: one stalled step does not count)")
      .add("elastic.migrate-at", migrate_at,
           "with --fault.recover: STEP:RANK:PROC moves rank RANK (its worker and parameters) to process PROC "
           "after STEP steps, the plan kept (the operator's migration)")
      .add("fault.slow-rank", slow_rank,
           "test hook: the process hosting this rank of the first plan runs --fault.slow-factor times slower "
           "(every task takes that much longer: a straggler)")
      .add("fault.slow-factor", slow_factor, "... this many times slower (> 1)")
      .add("launch.bind-cores", bind_cores,
           "with --launch.nproc: bind each process to its own share of this machine's cores (process r to "
           "cores r*C/N .. (r+1)*C/N - 1, one core each where there are fewer), as MPI's --bind-to core does; "
           "off: the kernel places them")
      .add("launch.joiners", joiners,
           "with --launch.nproc and --elastic.max-procs: the launcher also starts this many processes that join "
           "the running job (as --join=HOST:PORT would from another machine)")
      .add("fault.signal", signal, "test hook: KILL, STOP or TERM: each process of --fault.signal-rank raises it ...")
      .add("fault.signal-rank", signal_rank, "... these processes (e.g. 2,3) ...")
      .add("fault.signal-step", signal_step,
           "... after these steps (1-based, one per process), in the job's first attempt ...")
      .add("fault.signal-at", signal_at,
           "... step: before the next step starts; transition: as the transition due after that step (a leave, "
           "join, migration or re-plan) begins on that process, the others in the middle of it; exchange: as that "
           "transition's state starts to move between processes (one for all, or one per process: step,transition)");
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
  // a task of a Slurm step: Slurm's variables where the command line and RANK/WORLD_SIZE/MASTER_*
  // are silent (the launcher's children and --join are not tasks)
  if (!launched && join.empty() && !opts.was_set("dist.rank") && !std::getenv("RANK")) {
    auto step = slurm_step_from_environment();
    if (!step) return step.error();
    if (*step) {
      const slurm_step& s = **step;
      nproc = 0;  // srun started every task already
      rank = s.procid;
      if (!opts.was_set("dist.world") && !std::getenv("WORLD_SIZE")) world = s.ntasks;
      if (!opts.was_set("dist.master-addr") && !std::getenv("MASTER_ADDR")) master_addr = s.nodes.front();
      if (!opts.was_set("dist.master-port") && !std::getenv("MASTER_PORT") && !s.job_id.empty())
        master_port = slurm_port(s.job_id);
      if (s.several_hosts()) {
        if (!opts.was_set("dist.bind")) bind = "0.0.0.0";
        if (!std::getenv("COHORT_JOB_SECRET") && !std::getenv("COHORT_JOB_SECRET_FILE")) {
          auto file = slurm_secret_file(s, std::chrono::milliseconds(join_timeout_ms));
          if (!file) return file.error();
          ::setenv("COHORT_JOB_SECRET_FILE", file->c_str(), 1);
        }
      }
      slurm_job = s.job_id.empty() ? "?" : s.job_id;
    }
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
    // without the job's size: a process joining the running job (it learns the size)
    join_running = !opts.was_set("dist.world") && !std::getenv("WORLD_SIZE");
    if (!join_running && world < 2)
      return make_error(errc::invalid_argument, "--dist.world must be at least 2 for a node of the job's start");
    if (join_running && rank > 0)
      return make_error(errc::invalid_argument,
                        "--join without --dist.world joins the running job: it takes the place it is given "
                        "(drop RANK / --dist.rank)");
  }
  if (nproc < 0 || nproc > 64) return make_error(errc::invalid_argument, "--launch.nproc must be between 0 and 64");
  if (max_restarts < 0 || max_restarts > 1000)
    return make_error(errc::invalid_argument, "--launch.max-restarts must be between 0 and 1000");
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
  if (!opts.was_set("dist.replacement") && std::getenv("COHORT_REPLACEMENT") &&
      std::string(std::getenv("COHORT_REPLACEMENT")) == "1")
    replacement = true;
  if (replace_wait_ms < 0) return make_error(errc::invalid_argument, "--fault.replace-wait-ms must be >= 0");
  if ((replace_wait_ms > 0 || replacement) && !recover)
    return make_error(errc::invalid_argument,
                      std::string(replacement ? "--dist.replacement" : "--fault.replace-wait-ms") +
                          " needs --fault.recover=true (a replacement joins a job that goes on after a loss)");
  if (replicas != 0 && replicas != 1)
    return make_error(errc::invalid_argument, "--fault.replicas must be 0 or 1, got " + std::to_string(replicas));
  if (replacement && rank == 0)
    return make_error(errc::invalid_argument, "--dist.replacement: process 0 cannot be replaced");
  if (replan != "auto" && replan != "always" && replan != "keep")
    return make_error(errc::invalid_argument, "--fault.replan must be auto, always or keep, got '" + replan + "'");
  signal_at_each = split_commas(signal_at);
  if (signal_at_each.empty()) signal_at_each.emplace_back();
  for (const auto& at : signal_at_each)
    if (at != "step" && at != "transition" && at != "exchange")
      return make_error(errc::invalid_argument,
                        "--fault.signal-at must be step, transition or exchange, got '" + at + "'");
  if (!signal.empty() && signal != "KILL" && signal != "STOP" && signal != "TERM")
    return make_error(errc::invalid_argument, "--fault.signal must be KILL, STOP or TERM, got '" + signal + "'");
  if (leave_after < 0) return make_error(errc::invalid_argument, "--elastic.leave-after must be >= 0");
  if (leave_after > 0) {
    const std::int64_t size = nproc > 0 ? nproc : world;
    if (!recover)
      return make_error(errc::invalid_argument,
                        "--elastic.leave-after needs --fault.recover=true (a job that goes on with fewer processes)");
    if (leave_rank < 1 || leave_rank >= size)
      return make_error(errc::invalid_argument, "--elastic.leave-rank must name a node of the job: 1.." +
                                                    std::to_string(size - 1) + ", got " + std::to_string(leave_rank));
  }
  // (a process joining the running job takes the job's bounds as its coordinator has them)
  const std::int64_t size = join_running ? std::max<std::int64_t>(min_procs, 1) : nproc > 0 ? nproc : world;
  if (max_procs < 0 || (max_procs > 0 && max_procs < size && !join_running) || max_procs > 4096)
    return make_error(errc::invalid_argument, "--elastic.max-procs must be 0 or between the job's size (" +
                                                  std::to_string(size) + ") and 4096, got " +
                                                  std::to_string(max_procs));
  if (max_procs > size && !recover)
    return make_error(errc::invalid_argument,
                      "--elastic.max-procs needs --fault.recover=true (a job that changes its processes)");
  if (min_procs < 1 || min_procs > size)
    return make_error(errc::invalid_argument, "--elastic.min-procs must be between 1 and the job's size (" +
                                                  std::to_string(size) + "), got " + std::to_string(min_procs));
  if (scale_out != "auto" && scale_out != "always" && scale_out != "never")
    return make_error(errc::invalid_argument,
                      "--elastic.scale-out must be auto, always or never, got '" + scale_out + "'");
  if (batch_mode != "fixed" && batch_mode != "scale")
    return make_error(errc::invalid_argument, "--elastic.batch must be fixed or scale, got '" + batch_mode + "'");
  if (join_after < 0) return make_error(errc::invalid_argument, "--elastic.join-after must be >= 0");
  if (joiners < 0 || joiners > 64) return make_error(errc::invalid_argument, "--launch.joiners must be 0..64");
  if (bind_cores && nproc < 2)
    return make_error(errc::invalid_argument, "--launch.bind-cores binds the processes --launch.nproc starts");
  if (joiners > 0 && (nproc < 2 || max_procs == 0))
    return make_error(errc::invalid_argument, "--launch.joiners needs --launch.nproc and --elastic.max-procs");
  if (join_running && !recover)
    return make_error(
        errc::invalid_argument,
        "--join without --dist.world joins a running job: it needs --fault.recover=true, as the job does");
  if (straggler_factor != 0 && (straggler_factor <= 1 || !recover))
    return make_error(errc::invalid_argument,
                      "--elastic.straggler-factor must be 0 (off) or above 1, with --fault.recover=true");
  if (straggler_steps < 1) return make_error(errc::invalid_argument, "--elastic.straggler-steps must be >= 1");
  if (!migrate_at.empty()) {
    long long st = -1, r = -1, q = -1;
    char tail = 0;
    if (std::sscanf(migrate_at.c_str(), "%lld:%lld:%lld%c", &st, &r, &q, &tail) != 3 || st < 1 || r < 0 || q < 0)
      return make_error(errc::invalid_argument,
                        "--elastic.migrate-at must be STEP:RANK:PROC (STEP >= 1), got '" + migrate_at + "'");
    if (!recover) return make_error(errc::invalid_argument, "--elastic.migrate-at needs --fault.recover=true");
    migrate_step = st, migrate_rank = r, migrate_process = q;
  }
  if (slow_rank < -1 || (slow_rank >= 0 && slow_factor <= 1) || slow_factor < 1)
    return make_error(errc::invalid_argument,
                      "--fault.slow-rank needs a rank >= 0 and --fault.slow-factor above 1 (got " +
                          std::to_string(slow_factor) + ")");
  if (signal_rank.size() != signal_step.size())
    return make_error(errc::invalid_argument, "--fault.signal-rank and --fault.signal-step need one step per process");
  if (signal_at_each.size() == 1) signal_at_each.resize(signal_rank.size(), signal_at_each.front());
  if (signal_at_each.size() != signal_rank.size())
    return make_error(errc::invalid_argument,
                      "--fault.signal-at needs one moment for every process of --fault.signal-rank or one per process, "
                      "got " +
                          std::to_string(signal_at_each.size()) + " for " + std::to_string(signal_rank.size()));
  return {};
}

int process_group::live() const {
  const auto m = control->members();
  return static_cast<int>(std::count(m.live.begin(), m.live.end(), true));
}

std::vector<int> process_group::owners(const planner::parallel_plan& plan) const {
  return planner::rank_layout::placed(plan.ranks(), control->members().live);
}

result<std::shared_ptr<transport::fabric>> process_group::connect(const planner::parallel_plan& plan) {
  const int ranks = plan.ranks();
  if (ranks % live() != 0)
    return make_error(errc::invalid_argument, "a plan of " + std::to_string(ranks) +
                                                  " ranks cannot be split evenly over " + std::to_string(live()) +
                                                  " processes");
  return connect(plan, owners(plan));
}

result<std::shared_ptr<transport::fabric>> process_group::connect(const planner::parallel_plan& plan,
                                                                  const std::vector<int>& owner) {
  if (static_cast<int>(owner.size()) != plan.ranks())
    return make_error(errc::invalid_argument,
                      "a placement of " + std::to_string(owner.size()) + " ranks for " + std::to_string(plan.ranks()));
  transport::tcp_fabric_options fo;
  fo.process_of_rank = owner;
  fo.process = process();
  fo.members = control->members().live;
  for (const auto& n : control->roster()) fo.peers.push_back({n.host, n.data_port});
  fo.secret = secret;
  fo.timeout = std::chrono::milliseconds(options.join_timeout_ms);
  fo.abandon = [c = control.get(), members = fo.members] {
    const auto live = c->members().live;
    for (std::size_t p = 0; p < members.size() && p < live.size(); ++p)
      if (members[p] && !live[p]) return true;
    return false;
  };
  if (options.transport == data_plane::ucx) {
    auto f = transport::ucx_fabric::create(fo);
    // every process takes part in the address exchange, even one whose UCX failed
    auto all = control->all_gather_text(key(control_key::ucx_addresses), f ? transport::to_hex((*f)->address()) : "-");
    if (!f) return f.error();
    if (!all) return all.error();
    std::vector<std::string> addresses;
    for (int p = 0; p < world(); ++p) {
      if (!fo.members[static_cast<std::size_t>(p)]) {  // lost: not dialled
        addresses.emplace_back();
        continue;
      }
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
  c.world = o.join_running ? 0 : static_cast<int>(o.rank == 0 ? o.slots() : o.world);
  c.initial = static_cast<int>(o.world);
  // spares wait even in a full job; at process 0, or at the process that takes over from it
  c.admit_joins = o.recover && o.max_procs > 0;
  c.process = o.join.empty() ? static_cast<int>(o.rank) : (o.rank > 0 ? static_cast<int>(o.rank) : -1);
  c.master_host = o.master_addr;
  c.master_port = static_cast<int>(o.master_port);
  c.secret = g->secret;
  c.heartbeat = std::chrono::milliseconds(o.heartbeat_ms);
  c.heartbeat_timeout = std::chrono::milliseconds(o.heartbeat_timeout_ms);
  c.join_timeout = std::chrono::milliseconds(o.join_timeout_ms);
  c.cores = kernels::available_cores();
  c.keep_going = o.recover;
  c.succession = o.recover;  // 3 or more processes survive losing the coordinator (control_succession.cpp)
  c.standby_host = o.bind;
  c.admit_replacements = o.recover && o.replace_wait_ms > 0;
  c.replacement = o.replacement;
  c.standbys = o.rejoin_standbys;
  result<std::unique_ptr<transport::control_plane>> cp = make_error(errc::closed, "not started");
  if (c.process == 0) {
    // the launcher's listening socket where it handed one over (its port is MASTER_PORT)
    const char* inherited = std::getenv("COHORT_LAUNCHED") ? std::getenv("COHORT_CONTROL_FD") : nullptr;
    auto l = inherited ? transport::tcp_listener::adopt(std::atoi(inherited))
                       : transport::tcp_listener::open(o.bind, c.master_port);
    ::unsetenv("COHORT_CONTROL_FD");
    if (l && l->port() != c.master_port)
      return make_error(errc::invalid_argument, "the coordinator's port: the launcher's socket listens on " +
                                                    std::to_string(l->port()) + ", MASTER_PORT is " +
                                                    std::to_string(c.master_port));
    if (!l) return make_error(l.error().code, "the coordinator's port: " + l.error().message);
    cp = transport::control_plane::coordinate(c, std::move(*l), g->data.port());
  } else {
    // a replacement may arrive before the coordinator has declared the process it replaces
    // lost: it asks again until the join timeout
    const auto deadline = std::chrono::steady_clock::now() + c.join_timeout;
    for (;;) {
      cp = transport::control_plane::join(c, g->data.port());
      if (cp || !o.replacement || std::chrono::steady_clock::now() >= deadline) break;
      const std::string& why = cp.error().message;
      if (why.find("not a lost process") == std::string::npos && why.find("no lost process") == std::string::npos)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (!cp) return cp.error();
  g->control = std::move(*cp);
  return g;
}

}  // namespace cohort::apps
