// The coordinator's decisions as a plain state machine: events in (a worker finished a step,
// a worker died, the job's loss is known, a recovery or a plan transition is done, the
// parameters are collected), actions out (start a step, close the fabric, combine the loss
// across processes, report the step, recover, change the plan, collect, finish). The
// coordinator actor (coordinator.cpp) turns messages into these events and these actions into
// messages; the decisions are unit-tested here without a scheduler (test/actors/step_protocol_test).
//
// A step is committed when every local worker finished it; its gradients are applied at the
// next step's start. A failed step is never committed: in one process the generation ends,
// dead workers are respawned, the others reset, and the step is redone (at most max_restarts
// times); across processes a failure ends the run. After a committed step the next action is
// a plan transition when one is due at that step boundary, the parameters' collection after
// the last step, or the next step. Across processes a step's loss is summed over the processes
// off the critical path: the next step starts at once and the step is reported when its sum
// arrives (in order); a transition or the collection waits until every step is reported.
// With replan_on_rejoin, a rejoin is followed by a re-plan (a transition_action with replan
// set) before the interrupted step is redone; a re-plan that keeps the plan steps on.
//
//   step_protocol::config c;  c.steps = 3;  c.ranks = 2;
//   step_protocol p(c);
//   auto now = clock_type::now();
//   actions a = p.start(now);                       // {start_step{gen 0, step 0, committed -1}}
//   step_outcome ok;
//   ok.rank = 0;  a = p.on_outcome(0, 0, 0, ok, "", now);   // {}: rank 1 still runs
//   ok.rank = 1;  ok.report.reports_loss = true;  ok.report.loss_share = 0.7;
//   a = p.on_outcome(0, 0, 1, ok, "", now);         // {report_step{...}, start_step{gen 0, step 1, committed 0}}
//   assert(a.size() == 2 && std::get<start_step_action>(a[1]).committed == 0 && p.losses()[0] == 0.7);
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/worker_step.hpp"
#include "graph/error.hpp"

namespace cohort::actors {

using clock_type = std::chrono::steady_clock;

/// An operator's migration (--elastic.migrate-at=STEP:RANK:PROC): after `at_step` steps, rank
/// `rank` moves to process `process`.
struct migration_request {
  std::int64_t at_step = 0;
  int rank = 0, process = 0;
};

/// What a worker reports for a step; an error leaves `report` empty and sets `failure` (and
/// its code: a step that fails on bad input, e.g. a batch of the wrong shape, ends the run
/// with that code once it has failed every restart).
struct step_outcome {
  int rank = -1;
  step_report report;
  std::string failure;
  errc code = errc::closed;
};

struct step_metrics {
  std::int64_t step = 0;
  double loss = 0;
  double seconds = 0;  // wall time of the step, commit included
  std::int64_t generation = 0;
  int layout = 0;  // plan transitions before this step (0: the first plan)
  /// Per rank: seconds in forward, backward and update tasks this step (zeros for the ranks
  /// of other processes).
  std::vector<planner::task_seconds> task_seconds;
  /// Bytes this process's workers sent to exchange sparse tables' rows this step.
  std::int64_t sparse_bytes = 0;
  /// Per rank: the version of the tables its lookups read (step_report::table_version; -1: no
  /// sparse tables, or a rank of another process).
  std::vector<std::int64_t> table_versions;
  /// The step's global batch and learning rate (the coordinator's; under --elastic.batch=scale
  /// they follow the plan). 0: not known (the serial trainer's).
  std::int64_t rows = 0;
  double lr = 0;
};

struct failure_event {
  int rank = -1;
  std::int64_t step = -1;
  std::string reason;
  double detect_seconds = 0;   // from the step's start to the coordinator seeing the death
  double recover_seconds = 0;  // from seeing it to the redone step starting
};

struct start_step_action {
  std::int64_t generation = 0, step = 0, committed = -1;
};
struct close_fabric_action {
  std::string reason;
};
struct combine_loss_action {  // across processes: the job's loss is the sum of every process's
  std::int64_t step = 0;
  double local_loss = 0;
  double busiest_s = 0;  // its busiest rank's forward and backward seconds in the step, as one rank alone
};
struct report_step_action {
  step_metrics metrics;
};
struct recover_action {  // a new generation: new fabric, respawn the dead, reset the others, roll back
  std::int64_t generation = 0, committed = -1;
  std::vector<int> respawn, reset;
};
struct rejoin_action {  // across processes: wait for the job's new membership, restore the lost ranks, redo
  std::int64_t generation = 0, committed = -1;
  std::string failure;         // what failed (named in the error if no membership change follows)
  bool in_transition = false;  // a plan change at a step boundary failed, not a step
};
struct transition_action {  // change the plan at this step boundary
  std::int64_t step = 0;
  std::size_t change = 0;  // which of the configured changes
  bool replan = false;     // none of them: after a lost process, the plan for the devices that remain
  /// None of them either: these processes (by process) leave the job in good order; their
  /// ranks' state moves to the others (a re-plan for the devices that remain with replan_on_rejoin).
  std::vector<bool> leave;
  /// None of them either: this many processes wait to join the job; process 0 decides whether
  /// it grows (the cost model), admits them, and the job changes to the plan for the larger
  /// job — or goes on as it is (on_plan_kept).
  int joiners = 0;
  /// None of them either: a migration — process 0 moves one rank of straggler `straggler`, or
  /// (`migration` >= 0) the operator's request config::migrations[migration].
  int straggler = -1;
  int migration = -1;
};
struct snapshot_action {  // copy the committed state for a checkpoint, then go on
  std::int64_t step = 0;  // steps done
  std::int64_t committed = -1;
};
struct evaluate_action {  // --eval.every: the committed parameters evaluated, then on
  std::int64_t steps_done = 0;
  std::int64_t committed = -1;
};
struct collect_action {
  std::int64_t committed = -1;
};
struct finish_action {
  status outcome;
};
using coordinator_action =
    std::variant<start_step_action, close_fabric_action, combine_loss_action, report_step_action, recover_action,
                 rejoin_action, transition_action, snapshot_action, evaluate_action, collect_action, finish_action>;
using actions = std::vector<coordinator_action>;

class step_protocol {
 public:
  struct config {
    std::int64_t steps = 0;
    int ranks = 1;
    std::vector<bool> local;     // which ranks run in this process (all when empty)
    bool multi_process = false;  // the loss is combined across processes; a failure ends the run
    int max_restarts = 3;
    std::vector<std::int64_t> change_at;  // plan transitions after these many steps, ascending
    std::int64_t first_step = 0;          // steps done before this run (a resumed run)
    std::int64_t checkpoint_every = 0;    // a snapshot after every this many steps (0: none)
    std::int64_t evaluate_every = 0;      // an evaluation after every this many steps (0: none)
    /// Across processes: a failed step (a lost process) is recovered inside the job rather than
    /// ending the run; a step then commits only once its job-wide loss is known, so that every
    /// committed step is complete on every process that remains.
    bool rejoin = false;
    /// With rejoin: once the lost ranks are restored onto the processes that remain, the
    /// planner is asked for a plan for their devices (a transition_action with replan set) before
    /// the next step.
    bool replan_on_rejoin = false;
    /// Operator's migrations, ascending at_step (a transition_action with `migration`).
    std::vector<migration_request> migrations;
    /// A process coming into a running job: start() waits (no step); a replacement's
    /// on_rejoined, or a joining process's on_joined, takes the steps done from the others.
    bool joining = false;
  };

  explicit step_protocol(config c);

  actions start(clock_type::time_point now);
  /// A worker's answer for (generation, step); answers of an older generation or step are
  /// ignored. `fabric_reason` is why the fabric closed, if it did (named in a failure).
  actions on_outcome(std::int64_t generation, std::int64_t step, int rank, step_outcome o,
                     const std::string& fabric_reason, clock_type::time_point now);
  /// A worker of this process died (its monitor fired).
  actions on_worker_lost(int rank, const std::string& reason, const std::string& fabric_reason,
                         clock_type::time_point now);
  /// The job's loss of `step` (combine_loss_action's answer, in step order) or why it is not known.
  actions on_loss(std::int64_t step, result<double> total, clock_type::time_point now);
  /// Every respawned worker started, every other reset, every parameter piece rolled back.
  actions on_recovered(clock_type::time_point now);
  /// Across processes: the job's processes that remain took over the lost ranks (`ranks`
  /// ranks, `local` of them here) and agreed that `committed` steps are done — one more than
  /// here when another process saw the job's loss of the step this one was summing (`loss`);
  /// the interrupted step is redone. `from_checkpoint`: the state came from a checkpoint of
  /// `committed` + 1 steps, and the steps after it are trained again (their losses replaced).
  /// `devices_lost`: the job has fewer processes than before the loss (with replan_on_rejoin a
  /// re-plan follows; a replacement that took the lost one's place needs none).
  actions on_rejoined(int ranks, std::vector<bool> local, std::int64_t committed, double loss,
                      clock_type::time_point now, bool from_checkpoint = false, bool devices_lost = true);
  /// The job's sum of the step now summing named processes that asked to leave after it: at
  /// the boundary after its commit (before a checkpoint or a change due there) the job moves
  /// their state to the others (a transition_action with `leave`). Ignored after the last step.
  void leave_after_commit(std::vector<bool> leaving);
  /// This process was one of them: its state moved, the run ends here (no collection).
  actions on_left();
  /// The job's sum of the step now summing says `joiners` processes wait to join: at the
  /// boundary after its commit (after a leave due there, before a checkpoint) a transition_action
  /// with `joiners`. Ignored after the last step.
  void join_after_commit(int joiners);
  /// The job's sum of the step now summing named a straggler: at the boundary after its commit
  /// (after a join due there) a transition_action with `straggler`. Ignored after the last step.
  void migrate_after_commit(int straggler);
  /// A process joining the running job (config::joining): admitted after `committed` + 1 steps;
  /// it takes part in the transition to the larger job (on_transition_done then starts the
  /// next step).
  void on_joined(std::int64_t committed);
  /// The plan changed: `ranks` ranks now, `local` of them here.
  actions on_transition_done(int ranks, std::vector<bool> local, clock_type::time_point now);
  /// Across processes with rejoin: the transition in progress failed where the job meets (a
  /// process lost while the plan was shared, the state moved or the new data plane connected),
  /// before this process installed the new plan. The transition is dropped — the old plan and
  /// its committed state are still here — and the processes that remain recover as after a
  /// failed step (a rejoin_action, no step to redo); what asked for the transition asks again.
  /// Without rejoin the run ends with `e`.
  actions on_transition_lost(const error& e, clock_type::time_point now);
  /// A re-plan after a loss kept the plan (the planner chose it again, or found none): the next step.
  actions on_plan_kept(clock_type::time_point now);
  /// The evaluation of an evaluate_action is done: the next step (or what is due first).
  actions on_evaluated(clock_type::time_point now);
  /// The snapshot of a checkpoint is taken (its write goes on in the background).
  actions on_snapshot_taken(clock_type::time_point now);
  actions on_collected();
  /// Anything that ends the run (a failed recovery, transition or collection).
  actions on_error(const error& e);

  std::int64_t step() const { return step_; }
  std::int64_t committed() const { return committed_; }
  std::int64_t generation() const { return generation_; }
  /// Failed steps redone in the whole run (each step may fail max_restarts times).
  int restarts() const { return restarts_; }
  /// From the latest failed step's start to its failure being seen.
  double last_detect_seconds() const { return std::chrono::duration<double>(detected_at_ - step_start_).count(); }
  int layout() const { return layout_; }
  bool finished() const { return phase_ == phase::done; }
  const std::vector<double>& losses() const { return losses_; }
  const std::vector<failure_event>& failures() const { return failures_; }

 private:
  enum class phase {
    idle,
    stepping,
    summing,
    draining,
    snapshotting,
    recovering,
    rejoining,
    transitioning,
    evaluating,
    collecting,
    done
  };

  actions begin_step(clock_type::time_point now);
  actions after_commit(clock_type::time_point now);
  /// Into the transitioning phase with `a` (kept: a transition lost on the way is due again).
  actions begin_transition(transition_action a);
  /// The step's outcomes are all in and good: commit it (or, with rejoin, first its loss).
  actions commit(clock_type::time_point now);
  actions commit_with_loss(double total, clock_type::time_point now);
  /// A new placement of the ranks (a transition or a rejoin): `ranks`, `local` of them here.
  void adopt_ranks(int ranks, std::vector<bool> local);
  actions decide_recovery();
  /// A process coming into a running job (a replacement, a joining process): its steps start
  /// after the job's `committed` + 1.
  void start_where_the_job_is(std::int64_t committed);
  actions finish(status st);
  bool is_local(int rank) const { return local_.empty() || local_[static_cast<std::size_t>(rank)]; }

  config cfg_;
  std::vector<bool> local_;
  int ranks_;
  phase phase_ = phase::idle;
  std::int64_t generation_ = 0, step_ = 0, committed_ = -1, snapshot_at_ = -1, evaluated_at_ = -1;
  std::size_t next_change_ = 0;
  bool replan_due_ = false;    // a recovery asks for a re-plan at the next boundary
  std::vector<bool> leaving_;  // processes that leave at the next boundary (by process)
  int joiners_ = 0;            // processes waiting to join at the next boundary
  int straggler_ = -1;         // a straggler to relieve at the next boundary
  std::size_t next_migration_ = 0;
  transition_action in_transition_;  // the latest transition begun
  int restarts_ = 0, layout_ = 0, outstanding_ = 0;
  int step_failures_ = 0;  // failures of the step now in flight (restarts_ counts the run's)
  bool failed_ = false;
  std::string first_failure_;
  errc first_code_ = errc::closed;
  std::vector<std::optional<step_outcome>> outcomes_;
  std::vector<bool> dead_;
  clock_type::time_point step_start_, detected_at_;
  std::deque<step_metrics> unreported_;  // committed steps whose job-wide loss is on its way
  step_metrics summing_;                 // rejoin: the step whose loss is being summed before its commit
  std::vector<double> losses_;
  std::vector<failure_event> failures_;
};

}  // namespace cohort::actors
