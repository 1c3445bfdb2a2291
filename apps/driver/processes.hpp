// Multi-process jobs for the apps. One job is N processes of the same app: process 0 is the
// coordinator (it plans, prints the summary and reports a lost node), the others are nodes
// that join it. Three ways to start them:
//
//   mlp --launch.nproc=2 --plan.dp=2            this machine: starts 2 processes and waits
//   RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 mlp ...   Slurm/Kubernetes style
//   mlp --join=10.0.0.1:29500 --dist.world=2 ...   a node numbered in join order
//   mlp --join=10.0.0.1:29500 ...                  a process joining the running job (it grows:
//                                                  its coordinator was started with --elastic.max-procs)
//
// Binding anything but loopback (--dist.bind) needs the job secret (COHORT_JOB_SECRET_FILE,
// mode 0600, or COHORT_JOB_SECRET): every connection proves it before anything else is read.
// app::run (app.hpp) does the following for every app:
//
//   int main(int argc, char** argv) {
//     option_set opts("mlp", "Trains a multi-layer perceptron.");
//     process_options dist;
//     dist.add_to(opts);                                    // --launch.nproc, --join, --dist.*
//     auto r = opts.parse(argc, argv);
//     if (!r) return fail("mlp", r.error().message, 2);
//     if (auto st = dist.finish(opts); !st) return fail("mlp", st.error().message, 2);   // RANK, WORLD_SIZE, ...
//     if (dist.launches()) return launch_processes(argc, argv, dist, opts);              // N copies of this program
//     auto group = form_process_group(dist);               // joined: the roster is known
//     if (!group) return fail("mlp", group.error().message, exit_code_for(group.error()));
//     auto fabric = (*group)->connect(planner::parallel_plan{.dp = 2});   // every process at the same point
//     return fabric ? 0 : 1;
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/driver/options.hpp"
#include "planner/plan.hpp"
#include "transport/control_plane.hpp"
#include "transport/tcp_fabric.hpp"

namespace cohort::apps {

enum class data_plane { tcp, ucx };
/// "tcp", "ucx".
const char* to_string(data_plane d);

struct process_options {
  std::int64_t nproc = 0;             // --launch.nproc: start this many local processes
  std::int64_t max_restarts = 0;      // --launch.max-restarts: restart the whole job this often
  std::string join;                   // --join=HOST:PORT
  std::int64_t rank = -1, world = 1;  // this process and the job's size (RANK, WORLD_SIZE)
  std::string master_addr = "127.0.0.1";
  std::int64_t master_port = 29500;
  std::string bind = "127.0.0.1";      // where this process listens
  std::string slurm_job;               // the Slurm job this process is a task of (empty: none)
  bool recover = false;                // --fault.recover: a lost node leaves the job running
  std::string replan = "auto";         // --fault.replan: auto, always, keep (after a recovered loss)
  std::int64_t replace_wait_ms = 0;    // --fault.replace-wait-ms: wait for a replacement after a loss
  std::int64_t replicas = 1;           // --fault.replicas: buddy copies of pieces without a replica
  bool replacement = false;            // --dist.replacement ($COHORT_REPLACEMENT=1): join a running job
  std::string transport_text = "tcp";  // --dist.transport, parsed into transport by finish()
  data_plane transport = data_plane::tcp;
  std::int64_t heartbeat_ms = 1000, heartbeat_timeout_ms = 5000, join_timeout_ms = 60000;
  // --elastic.leave-after / --elastic.leave-rank: that node leaves the job in good order after
  // that many steps, as on SIGTERM (0: never)
  std::int64_t leave_after = 0, leave_rank = -1;
  // --elastic.max-procs / --elastic.min-procs: the most processes the job grows to (0: its size:
  // it cannot grow) and the fewest it goes on with; --elastic.scale-out: auto, always, never
  std::int64_t max_procs = 0, min_procs = 1;
  std::string scale_out = "auto";
  // --elastic.batch: fixed (every plan trains --train.batch at --train.lr) or scale (the batch
  // and the learning rate follow the data-parallel degree, batch_rule.hpp)
  std::string batch_mode = "fixed";
  // --elastic.join-after (test hook): process 0 takes waiting processes only after this step,
  // and waits there for as many as fill --elastic.max-procs (0: whenever they come)
  std::int64_t join_after = 0;
  // set by the driver, not an option: a process whose join was dropped (another process lost as
  // its state moved) joins again, asking these standby ports should the coordinator not answer
  std::vector<std::pair<std::string, int>> rejoin_standbys;
  std::int64_t joiners = 0;   // --launch.joiners: the launcher also starts this many joining processes
  bool bind_cores = false;    // --launch.bind-cores: each process on its own share of the cores
  bool join_running = false;  // --join without a size: this process joins the running job
  // --elastic.straggler-factor / -steps: a process slower than its peers by the factor for that
  // many steps is relieved of a rank (0: never); --elastic.migrate-at=STEP:RANK:PROC
  double straggler_factor = 0;
  std::int64_t straggler_steps = 10;
  std::string migrate_at;
  std::int64_t migrate_step = -1, migrate_rank = -1, migrate_process = -1;  // parsed from migrate_at
  // the test hook --fault.slow-rank / --fault.slow-factor: the process hosting that rank of the
  // first plan takes this many times as long for every task
  std::int64_t slow_rank = -1;
  double slow_factor = 1;
  // Test hook: process signal_rank[i] raises `signal` (KILL, STOP or TERM) after step signal_step[i]:
  // before the next step starts (signal_at "step") or as a transition after that step begins
  // there (signal_at "transition": the others are in the middle of it). signal_at names one
  // moment for every process or one per process ("step,transition"); signal_at_each[i] is
  // process signal_rank[i]'s (set by finish()).
  std::string signal;
  std::vector<std::int64_t> signal_rank, signal_step;
  std::string signal_at = "step";
  std::vector<std::string> signal_at_each;

  void add_to(option_set& opts);
  /// After parsing: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT where the command line
  /// left them unset; --join's address. Errors: malformed values.
  status finish(const option_set& opts);
  /// This run starts local processes rather than training itself.
  bool launches() const { return nproc > 1; }
  /// This process is one of several.
  bool multi_process() const { return world > 1 || join_running; }
  /// The most processes the job may have (its slots).
  std::int64_t slots() const { return std::max(world, max_procs); }
  /// Prints on stdout and stderr (process 0, or a single-process run).
  bool reports() const { return rank <= 0; }
};

/// This process's membership of a job: the control plane (joined, roster known) and the
/// data listener the fabric connects through.
struct process_group {
  process_options options;
  std::string secret;
  std::unique_ptr<transport::control_plane> control;
  transport::tcp_listener data;

  int process() const { return control->process(); }
  /// The job's slots: the most processes it may have.
  int world() const { return control->world(); }
  /// The processes in the job now.
  int live() const;
  /// Which process hosts each rank of `plan`: contiguous blocks over the processes in the job
  /// (planner::rank_layout::placed).
  std::vector<int> owners(const planner::parallel_plan& plan) const;
  /// The data plane (options.transport) for the ranks of `plan` (a multiple of the processes
  /// in the job). Every process calls it at the same point.
  result<std::shared_ptr<transport::fabric>> connect(const planner::parallel_plan& plan);
  /// The same for ranks placed as `owner` says, among the processes still in the job.
  result<std::shared_ptr<transport::fabric>> connect(const planner::parallel_plan& plan, const std::vector<int>& owner);
};

/// Joins (or, on process 0, coordinates) the job. Errors: a non-loopback bind without a job
/// secret, a secret file others can read, a coordinator that cannot be reached or refuses.
result<std::unique_ptr<process_group>> form_process_group(const process_options& o);

/// The launcher: starts nproc copies of this program (argv without --launch.nproc) with
/// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, and `threads` compute threads each when
/// the user did not choose; forwards SIGINT/SIGTERM; when one fails, lets the coordinator
/// report, then stops the rest (none is left behind) and, up to --launch.max-restarts times
/// (not after bad input, exit 2, or the user's signal), starts them all again, resuming from
/// the newest checkpoint (launcher.cpp). Returns the job's exit code.
/// `checkpoint_dir`: where the job's checkpoints go (--checkpoint.dir, named when it restarts).
int launch_processes(int argc, char** argv, const process_options& o, const option_set& opts,
                     const std::string& checkpoint_dir = "");

}  // namespace cohort::apps
