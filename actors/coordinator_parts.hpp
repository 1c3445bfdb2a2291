// The coordinator's parts that its two files share (coordinator.cpp: steps, recovery,
// collection; coordinator_transition.cpp: plan transitions). Internal to actors/.
//
//   void act(coordination::self_ptr self) {
//     coordination::execute(self, self->state.protocol->on_collected());   // carry out actions
//   }
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "actors/coordinator.hpp"

namespace cohort::actors::coordination {

using self_ptr = coordinator_hdl::stateful_pointer<coordinator_state>;

/// Tags of the state exchange between processes (the pipeline uses 2, data parallelism 3).
constexpr std::uint64_t transition_tag_space = 5;
constexpr std::uint64_t rejoin_tag_space = 6;

double since(std::chrono::steady_clock::time_point t);
/// Carries out the step protocol's actions, in order.
void execute(self_ptr self, actions todo);
std::string fabric_reason(self_ptr self);
bool is_local(self_ptr self, int rank);
std::vector<bool> local_flags(self_ptr self);
/// Runs `call` on the control proxy's thread; `then` gets control back once it returned.
void on_proxy(self_ptr self, std::function<void()> call, std::function<void()> then);
/// This process's data actor (configured), parameter actors (fresh, or holding `states`) and
/// workers for the current plan over the current fabric, from step `from_step` on (the data
/// cursor starts a stretch there; under --elastic.batch=scale the learning rate follows the
/// plan). `kept` (by rank, may be null): parameter actors that carry over from the previous
/// plan; the others are spawned (from `states` where given).
void spawn_plan(self_ptr self, std::int64_t from_step, std::vector<piece_state>* states,
                std::vector<param_actor_hdl>* kept = nullptr);
/// Stops the current plan's workers and parameter actors.
void retire_plan(self_ptr self);
/// The process of each rank of `plan`: blocks over the job's processes, a lost process's ranks
/// on those that remain (planner::rank_layout::placed); all 0 in one process.
std::vector<int> owners_of(self_ptr self, const planner::parallel_plan& plan);
/// Across processes: the processes that remain take over a lost one's ranks (coordinator_rejoin.cpp).
void rejoin(self_ptr self, const rejoin_action& a);
/// A replacement (run_options::joining): takes part in the recovery it joins, as the others do.
void join_running(self_ptr self);
/// A plan transition at a step boundary (coordinator_transition.cpp): a change the run asked
/// for, the re-plan after a lost process, processes leaving or joining.
void transition(self_ptr self, const transition_action& a);
/// A transition failed where the processes meet (a process lost while the plan was shared or
/// the state moved), before this process installed the new plan: the old plan stays, the
/// leavers count as members again, and the job recovers (step_protocol::on_transition_lost).
void transition_lost(self_ptr self, const error& e);
/// A decided plan, the same on every process: check it fits the processes, prepare it, move
/// the state and install it (`cause`: request, loss, leave, join, straggler). `placement`: a
/// migration's explicit placement of its ranks (empty: blocks over the live processes).
void prepare(self_ptr self, decided_plan d, std::int64_t step, std::chrono::steady_clock::time_point started,
             const std::string& cause, std::vector<int> placement = {});
/// A migration (coordinator_migrate.cpp): process 0 decides which rank moves where (the
/// operator's request, or a straggler's relief), every process moves it.
void migrate(self_ptr self, const transition_action& a, std::chrono::steady_clock::time_point started);
/// Processes wait to join (coordinator_join.cpp): process 0 decides and admits them, every
/// process changes to the plan for the larger job (or goes on as it is).
void grow(self_ptr self, const transition_action& a, std::chrono::steady_clock::time_point started);
/// A process joining the running job (run_options::joining with a next plan): takes part in
/// the transition to the larger job at the boundary it was admitted at.
void join_as_newcomer(self_ptr self);
/// A recovery is done: into the summary and to run_options::on_recovery.
void report_recovery(self_ptr self, recovery_record rec);
/// The re-plan after a recovery is decided (`plan_after` runs now; `replan` says what the
/// planner chose or why the plan stays): the pending recovery is reported.
void settle_recovery(self_ptr self, const std::string& plan_after, const std::string& replan);
/// A checkpoint's snapshot at a step boundary and its write in the background (coordinator_checkpoint.cpp).
void snapshot(self_ptr self, const snapshot_action& a);
/// The job's membership changes: a write waiting for another process's file gives up (the
/// writes after the change get a new flag).
void cancel_waiting_writes(self_ptr self);
/// The planner actor's refit for the summary, then the end of the run (once no write is in flight).
void finish_collection(self_ptr self);

}  // namespace cohort::actors::coordination
