// Training on the actor runtime: a plan becomes a coordinator, a data actor, one parameter
// actor and one worker actor per (replica, stage, tensor-parallel rank), all in this
// process. The coordinator drives the steps, commits each one when every worker finished
// it, reports metrics and per-task timings, and recovers from a worker that dies: it sees
// the death through a monitor, ends the generation (survivors blocked on the dead worker
// are released), respawns the worker, which refills its parameters from its parameter
// actor, and redoes the interrupted step — losses equal those of a run without the failure.
//
//   auto cfg = system_config(/*threads=*/2, {});
//   if (!cfg) return cfg.error();
//   caf::actor_system sys{**cfg};
//   run_options o;
//   o.plan = {.dp = 2, .tp = 2};  o.batch = 64;  o.steps = 100;  o.optimizer = sgd_config{.lr = 0.05f};
//   o.on_step = [](const step_metrics& m) { std::printf("%lld %f\n", static_cast<long long>(m.step), m.loss); };
//   result<run_summary> r = train(sys, tiny_mlp, tiny_batch, o);   // any model_fn and batch_fn
//   if (!r) return r.error();
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/batch_rule.hpp"
#include "actors/compile.hpp"
#include "actors/data_actor.hpp"
#include "actors/joining.hpp"
#include "actors/messages.hpp"
#include "actors/planner_actor.hpp"
#include "actors/state_layout.hpp"
#include "actors/step_protocol.hpp"
#include "actors/straggler_watch.hpp"
#include "actors/task_trace.hpp"
#include "actors/worker_actor.hpp"
#include "graph/optimizer.hpp"
#include "graph/progress.hpp"
#include "planner/plan_choice.hpp"
#include "planner/rank_layout.hpp"

#include <nlohmann/json.hpp>

namespace cohort::actors {

/// One plan change of a run (the summary's "transitions").
struct transition_record {
  std::int64_t step = 0;  // steps done before it
  /// request: a change the run asked for (a migration the operator asked for: `moved`); loss: a
  /// re-plan after a lost process; leave: processes left the job in good order (`leaving` names
  /// them); join: processes joined the running job (`joining` names them); straggler: a rank
  /// moved off a process that ran slower than its peers (`moved`, `why`)
  std::string cause = "request";
  std::string leaving;  // "process 2" (cause leave)
  std::string joining;  // "process 2, process 3" (cause join)
  /// A migration (cause straggler or request): "rank 2: process 1 -> process 0", and why
  std::string moved, why;
  std::string from, to;               // planner::describe of the two plans
  nlohmann::json plan;                // the new plan, as --plan.only prints it
  double seconds = 0;                 // from the step boundary to the next step's start
  double replan_seconds = 0;          // deciding the new plan (from the cached analysis)
  double predicted_step_s = 0;        // the planner's prediction for the new plan (0: none made)
  double prepare_seconds = 0;         // compiling it and planning the copies
  double move_seconds = 0;            // across processes: the state exchange (bytes_across_processes in it)
  double connect_seconds = 0;         // across processes: connecting the new plan's data plane
  double bytes_moved = 0;             // parameters and optimizer state copied into the new pieces
  double bytes_across_processes = 0;  // of which sent to other processes
  /// This process's actors: parameter actors that stayed (their pieces the same in both plans,
  /// nothing copied), were spawned and filled, or retired; workers are always replaced (their
  /// programs, groups and data plane change with the plan).
  int params_kept = 0, params_spawned = 0, params_retired = 0, workers_spawned = 0, workers_retired = 0;
  /// --elastic.batch=scale: the new plan's global batch and learning rate (0: the batch is fixed)
  std::int64_t batch = 0;
  double lr = 0;
};

/// Who remains in a job after a process was lost (the control plane's view).
struct job_membership {
  std::uint64_t epoch = 0;
  std::vector<bool> live;     // by process
  std::vector<int> lost;      // in the order they were lost
  std::vector<int> replaced;  // lost processes whose place a replacement took, in order
  std::vector<int> joined;    // processes admitted into the running job, in order
  std::string why;            // the report of the latest loss
};

/// One recovery of a running job (the summary's "recoveries").
struct recovery_record {
  std::int64_t step = 0;  // steps committed when it happened
  std::string lost;       // "process 1 (pid 4242)"
  std::string cause;
  double detect_s = 0;   // from the interrupted step's start to the failure seen here
  double recover_s = 0;  // from the failure seen to the redone step's start
  std::int64_t steps_redone = 0;
  /// What the loss interrupted: "step" (that step is redone) or "plan change" (the transition
  /// at a step boundary is dropped, nothing redone; what asked for it asks again).
  std::string interrupted = "step";
  std::string plan_before, plan_after;
  std::string source;  // "replica" (a data-parallel peer's or a buddy copy), "checkpoint"
  /// Where each lost rank's state came from ("rank 1 from its buddy copy on process 0").
  std::string restored_from;
  double bytes_moved = 0;  // state copied into the lost ranks' new homes
  /// The re-plan for the processes that remain (run_options::replan_on_loss): what the planner
  /// chose and predicted, or why the plan was kept; empty when none was asked for.
  std::string replan;
  /// The lost processes whose place a replacement took in this recovery ("process 1"); empty:
  /// none came (the others took over the lost ranks).
  std::string replacement;
  /// What the recovery did to the embedding tables beyond the step it redoes (--exec.mode):
  /// async's waiting entries applied now, geo's tables back to the replicas' last exchange;
  /// empty in sync mode.
  std::string tables;
};

/// One checkpoint of a run (the summary's "checkpoints").
struct checkpoint_record {
  std::int64_t step = 0;        // steps done
  std::string path;             // where it is (the first process), or the temporary directory
  double snapshot_seconds = 0;  // the step boundary's copy of the state (the steps wait for it)
  double write_seconds = 0;     // the background write (the steps go on)
  double bytes = 0;             // this process's file
  std::string error;            // why the write failed (--checkpoint.on-error=warn); empty when written
};

/// Checkpoints of a run: every `every` steps into `dir` (checkpoint_store.hpp).
struct checkpointing {
  std::string dir;
  std::int64_t every = 0;
  int keep = 3;
  bool stop_on_error = false;  // a failed write ends the run (otherwise it is reported and training goes on)
  /// This process's file as the background writer writes it (bytes of all), on its thread.
  progress_fn write_progress;
};

struct run_summary {
  std::vector<double> losses;
  parameter_store parameters;  // the trained model, whole (when run_options::collect_parameters)
  std::vector<failure_event> failures;
  std::vector<transition_record> transitions;
  std::vector<checkpoint_record> checkpoints;
  std::vector<recovery_record> recoveries;
  std::vector<scale_decision> scale_decisions;  // process 0: every answer to waiting processes
  std::vector<std::size_t> cuts;                // the stage cuts the first plan ran with (the planner's, or given)
  nlohmann::json prediction = nlohmann::json::object();  // the planner actor's refit (run_options::refit)
  int restarts = 0;
  double seconds = 0;
  /// This process left the running job in good order after this many steps (its state moved
  /// to the others); -1: it trained to the end.
  std::int64_t left_after = -1;
  /// Bytes this process's workers sent to exchange sparse tables' rows (step_metrics, summed).
  std::int64_t sparse_bytes = 0;
  /// The most steps any lookup's tables lagged behind (step - table version; -1: no sparse
  /// tables): 0 in sync mode, at most the staleness bound in async mode.
  std::int64_t max_table_staleness = -1;
};

/// What a job of several processes gives the runtime: this process runs its block of ranks
/// (planner::rank_layout::process_of_rank) over `fabric`; the calls below block and run on the
/// control proxy's thread, never the coordinator's. A failure ends the run unless the job
/// keeps going (`await_membership`): then the processes that remain take over the lost ranks.
/// A step's job-wide sum (process_hooks::sum_loss): the loss, who asked to leave after it, who
/// waits to join, every process's pace.
struct step_sum {
  double loss = 0;
  std::vector<bool> leaving;       // by process
  int joining = 0;                 // processes waiting to join the job (process 0's count)
  std::vector<double> per_rank_s;  // by process: the seconds one of its ranks takes alone there (0: none)
  int straggler = -1;              // process 0's word: this process is a straggler (-1: none)
};

/// What one process adds to a step's job-wide sum.
struct step_share {
  double loss = 0;
  bool leaving = false;  // it asks to leave the job after this step (process_hooks::wants_to_leave)
  int joining = 0;       // process 0: processes waiting to join (process_hooks::joiners_waiting)
  /// The seconds one of its ranks takes alone on it this step: its busiest rank's forward and
  /// backward seconds (the reduction, which waits for the slowest peer, left out) over the
  /// ranks that share each of its compute threads' cores.
  double per_rank_s = 0;
  int straggler = -1;  // process 0: the process it found to be a straggler
};

struct process_hooks {
  int process = 0, processes = 1;  // this process, the job's slots (the most processes it may have)
  /// The job's coordinator now (the control plane's leader: process 0, or the process that took
  /// over from a lost one). Null: process 0.
  std::function<int()> leader;
  /// Whether this process is the job's coordinator now.
  bool leads() const { return (leader ? leader() : 0) == process; }
  std::vector<bool> live;  // the processes in the job at the start, by slot
  fabric_ptr fabric;       // the first plan's data plane
  /// This process's share of a step (its loss, whether it asks to leave, its seconds per rank;
  /// process 0's count of waiting processes and its straggler) -> the job's sum (called in step
  /// order), among the processes of membership `epoch` (a later membership fails it at once).
  std::function<result<step_sum>(std::int64_t step, const step_share& mine, std::uint64_t epoch)> sum_loss;
  /// The coordinator of a job that may grow (process 0, or the process that took over from
  /// it; the others answer 0): how many processes wait to join that it has slots for, asked with
  /// step `step`'s sum (0-based). Null: it cannot grow.
  std::function<int(std::int64_t step)> joiners_waiting;
  /// The coordinator: admits up to `count` waiting processes in one membership change (a new
  /// epoch even for none) and returns the membership — unless a process of `live` (the
  /// membership as the runtime knows it) is lost by then: then nobody, no epoch added, and the
  /// membership with that loss.
  std::function<result<job_membership>(int count, const std::vector<bool>& live)> admit_joiners;
  /// Set where a node may leave in good order (SIGTERM, --elastic.leave-after): whether it asks
  /// to after step `step` (0-based). Null: never.
  std::function<bool(std::int64_t step)> wants_to_leave;
  /// Process 0: the control plane lets these processes go (a new membership without them; the
  /// others' await_membership returns it).
  std::function<status(const std::vector<int>& leavers)> depart;
  /// This process's parameter pieces by rank (empty where not local; `owner`: each rank's
  /// process) -> every rank's piece on the process that assembles the model; an empty vector
  /// elsewhere.
  std::function<result<std::vector<tensor>>(std::vector<tensor> pieces, const std::vector<int>& owner)> gather_pieces;
  /// Process 0's text to every process (the others pass ""), in membership `epoch`.
  std::function<result<std::string>(const std::string& text, std::uint64_t epoch)> share_plan;
  /// A new data plane for the ranks of `plan` placed on processes as `owner` says (every
  /// process that remains, at the same point).
  std::function<result<fabric_ptr>(const planner::parallel_plan& plan, const std::vector<int>& owner)> connect;
  /// Set when the job keeps going after losing a process: waits until the job's membership
  /// has moved past `epoch` and returns it (which processes remain, which were lost and why).
  std::function<result<job_membership>(std::uint64_t epoch)> await_membership;
  /// After a loss: every remaining process's line, by process ("" for the lost), in `epoch`.
  std::function<result<std::vector<std::string>>(const std::string& line, std::uint64_t epoch)> gather_lines;
  /// Set when replacements may join: waits up to `timeout` for the membership to move past
  /// `epoch` (a replacement took a lost process's place, or another was lost); errc::timeout
  /// when nothing changed.
  std::function<result<job_membership>(std::uint64_t epoch, std::chrono::milliseconds timeout)> await_replacement;
  /// Told the fabric now in use (after a transition), e.g. to close it when a node is lost.
  std::function<void(const fabric_ptr&)> adopt_fabric;
};

struct run_options {
  planner::parallel_plan plan;
  std::int64_t batch = 0;  // the global batch (the source's batches: see scale_base_dp)
  /// --elastic.batch=scale: the data-parallel degree `batch` is for (batch_rule.hpp): a plan of
  /// dp replicas trains round(batch x dp / scale_base_dp) samples a step at the optimizer's rate
  /// times that over `batch`. 0 (fixed): every plan trains `batch` at the optimizer's rate.
  int scale_base_dp = 0;
  batch_rule rule() const { return {batch, scale_base_dp}; }
  std::int64_t steps = 0;
  optimizer_config optimizer = sgd_config{};
  std::uint64_t seed = 0;
  int threads = 1;                           // OpenBLAS + kernel pools, split over workers
  std::chrono::milliseconds timeout{60000};  // every wait inside a step
  int max_restarts = 3;
  std::vector<std::size_t> stage_cuts;  // explicit pipeline cuts (empty: balanced)
  compile_options compile;              // e.g. sparse embedding-table gradients
  /// How data-parallel replicas share sparse tables' updates (sync, geo); the runtime sets its
  /// steps, changes and checkpoints from these options.
  table_exchange exchange;
  failure_injection inject;
  bool collect_parameters = true;                        // return the trained parameters in the summary
  std::function<void(const step_metrics&)> on_step;      // called by the coordinator, in order
  std::function<void(std::int64_t step)> on_step_start;  // before the coordinator starts a step (0-based)
  std::function<void()> on_start;                        // once the plan compiled, before any actor runs
  /// Steps whose task spans the workers record, and who gets them: each local worker's spans
  /// of a step, on the coordinator's thread as its outcome arrives (a redone step's again).
  trace_window trace;
  std::function<void(int rank, const planner::rank_place& at, std::int64_t step, std::vector<task_span>& spans)>
      on_spans;

  /// Plan transitions at step boundaries (ascending at_step), decided by the planner actor.
  std::vector<plan_change> changes;
  /// The planner's inputs for deciding them (the process that decides; null elsewhere).
  std::shared_ptr<planner::planning_setup> planning;
  /// The online refit the planner actor keeps (null: none).
  std::shared_ptr<planner::online_refit> refit;
  /// Called by the coordinator after each transition, in order.
  std::function<void(const transition_record&)> on_transition;
  /// Called as a transition after `steps` steps begins here, before anything is decided or
  /// moved (a test hook's place: a process lost in the middle of a transition).
  std::function<void(std::int64_t steps)> on_transition_start;
  /// Test hook: as a transition's state starts to move between processes, after that many steps.
  std::function<void(std::int64_t steps)> on_state_move;
  /// Across processes with recovery: after a lost process's ranks are restored onto the
  /// processes that remain, the planner actor plans for their devices (this request, on as
  /// many devices as those processes held) and the job changes to that plan before the next
  /// step; absent: the plan is kept, the lost ranks run where they were restored.
  std::optional<planner::plan_request> replan_on_loss;
  /// After a loss, how long to wait for a replacement to take the lost process's place (the
  /// plan and the placement then stay as they were); 0: the others take over at once.
  std::chrono::milliseconds replace_wait{0};
  /// Across processes with recovery: a buddy copy (replicas.hpp) of every piece that has no
  /// data-parallel replica on another process, kept bit-identical at every commit on the next
  /// process, so the loss of its owner is restored from it (not in geo or async mode: a copy
  /// could not follow the rows and entries they keep back).
  bool replicas = false;
  /// This process comes into the running job: where the job is (process 0's view) and the
  /// membership it joined. A replacement in a lost process's place takes part in the recovery,
  /// its ranks' state comes from the others, and it trains from the step they agree on; a
  /// process joining the running job (state.next set) takes part in the plan transition to
  /// the larger job at the step boundary it was admitted at.
  struct joining_job {
    joining_state state;
    job_membership members;
  };
  std::optional<joining_job> joining;
  /// How a process joining the running job ends (errc::closed) when the job changed as its
  /// state moved (another process lost): it holds nothing yet, the others recover without it;
  /// the driver has it wait to join again.
  static constexpr const char* join_dropped = "this process did not join: the job changed as it joined";
  /// Across processes with recovery: the fewest processes the job goes on with; a loss or a
  /// leave that leaves fewer ends the run (--elastic.min-procs).
  int min_processes = 1;
  /// Across processes with recovery: a process whose forward and backward seconds per rank (the
  /// median over the last `steps` steps) are above the factor times its peers' is a straggler,
  /// and process 0 moves one of its ranks where the step is predicted to be shortest (factor 0:
  /// never).
  straggler_settings stragglers;
  /// Migrations the operator asks for (--elastic.migrate-at): at a step boundary, a rank to a process.
  std::vector<migration_request> migrations;
  /// The test hook --fault.slow-factor: this process's workers take this many times their
  /// tasks' CPU time (they burn the difference; their reported task seconds include it). 1: none.
  double slow_factor = 1;
  /// Processes waiting to join (process_hooks::joiners_waiting): whether the job grows.
  scale_policy scale_out = scale_policy::automatic;
  /// Called on process 0 with every answer to waiting processes, in order.
  std::function<void(const scale_decision&)> on_scale_decision;
  /// --eval.every: after every this many steps (the last included) the committed parameters
  /// are assembled where the model is (process 0) and given to `on_evaluate` there, on the
  /// control proxy's thread, before the next step (every process takes part in the gather).
  /// Not in async mode (reading the pieces whole applies its waiting table entries early).
  std::int64_t evaluate_every = 0;
  std::function<status(std::int64_t steps_done, const parameter_store& parameters)> on_evaluate;
  /// Set for a job of several processes.
  std::optional<process_hooks> job;

  /// Where the first plan's pieces come from instead of the model's initialisation (a resumed
  /// run, --init.from): given every rank's piece layout and which ranks are this process's,
  /// the pieces of those ranks.
  std::function<result<std::vector<piece_state>>(const std::vector<piece_layout>& layouts,
                                                 const std::vector<bool>& local)>
      initial_state;
  std::int64_t first_step = 0;     // steps done before this run (a resumed run starts there)
  std::int64_t first_sample = -1;  // the data cursor at first_step (a resumed run's; -1: first_step x batch)
  std::optional<checkpointing> checkpoint;
  /// Called by the coordinator when a checkpoint's write ended (written or failed), in order.
  std::function<void(const checkpoint_record&)> on_checkpoint;
  /// Called by the coordinator after each recovery of the job from a lost process.
  std::function<void(const recovery_record&)> on_recovery;
};

/// Trains `steps` steps of `model` on `data` under `o.plan`, changing the plan where
/// `o.changes` say. Errors (with their cohort code): the plan cannot run this model (named),
/// a step failed more than max_restarts times (the first failure named), a plan change the
/// planner or the model cannot take.
result<run_summary> train(caf::actor_system& sys, const model_fn& model, batch_fn data, const run_options& o);

}  // namespace cohort::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::run_summary)
