// The coordinator actor: the step protocol's decisions (actors/step_protocol.hpp) carried out.
// It owns this process's actors of the current plan — data actor, parameter actors, workers —
// the fabric they share, the planner actor and, in a job of several processes, the control
// proxy that runs the blocking calls. Every event handler only sends messages or asks with a
// timeout; nothing in it waits.
//
//   auto compiled = compile(tiny_mlp, {.dp = 2}, /*batch=*/64);
//   if (!compiled) return compiled.error();
//   run_options options;
//   options.plan = compiled->plan;  options.batch = 64;  options.steps = 10;
//   auto model = std::make_shared<const compiled_model>(std::move(*compiled));
//   auto coord = sys.spawn(coordinator, model, options, batch_fn(tiny_batch),
//                          std::vector<piece_state>{});   // what train() does (pieces: a resumed run's)
//   result<run_summary> out = make_error(errc::closed, "no answer from the coordinator");
//   caf::scoped_actor self{sys};
//   self->request(coord, caf::infinite, run_atom::value)
//       .receive([&](run_summary& s) { out = std::move(s); }, [&](caf::error& e) { out = from_caf(e); });   // the first error
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/data_cursor.hpp"
#include "actors/runtime.hpp"
#include "actors/state_layout.hpp"
#include "actors/step_protocol.hpp"
#include "actors/straggler_watch.hpp"

namespace cohort::actors {

struct coordinator_state {
  run_options options;
  std::shared_ptr<const compiled_model> model;  // the current plan
  batch_fn data_source;
  data_cursor cursor;  // the samples each step takes (the batch changes under --elastic.batch=scale)
  float base_lr = 0;   // the optimizer's own learning rate (batch_rule::lr_factor scales it)
  std::optional<step_protocol> protocol;
  data_actor_hdl data;
  planner_actor_hdl planner;
  control_proxy_hdl proxy;
  std::vector<param_actor_hdl> params;  // by rank (empty handles: ranks of other processes)
  std::vector<worker_hdl> workers;
  std::vector<std::shared_ptr<const worker_spec>> specs;
  fabric_ptr fabric;
  std::vector<int> owner;                  // the process of each rank
  std::vector<int> buddies;                // by rank: the rank keeping its buddy copy (-1: none)
  std::vector<piece_ptr> copies;           // by rank: its buddy copy where a worker here keeps it
  std::vector<bool> live;                  // across processes: the job's processes that remain (by process)
  std::uint64_t membership_epoch = 0;      // the membership changes seen
  std::vector<bool> live_before_rejoin;    // the membership a recovery in progress started from
  std::vector<bool> live_at_transition;    // the membership a transition in progress started from
  std::size_t replaced_before_rejoin = 0;  // replacements that had joined before it
  std::size_t replaced_seen = 0;           // replacements in the latest membership seen
  std::size_t joined_seen = 0;             // processes admitted into the running job, in the latest membership seen
  int refused_joiners = 0;                 // process 0: the waiting processes the job last chose not to grow for
  std::string joining_note;                // the processes a join in progress admits ("process 2, process 3")
  /// An explicit placement of the current plan's ranks (a migration moved one); empty: the
  /// ranks in blocks over the live processes (rank_layout::placed). Any other change clears it.
  std::vector<int> placement;
  std::vector<double> per_rank_s;             // the latest step's seconds per rank, by process
  std::string moving_note, moving_why;        // the migration in progress: "rank 2: process 1 -> process 0", why
  std::optional<straggler_watch> stragglers;  // process 0, with run_options::stragglers
  int unrelieved = -1;                        // process 0: the straggler no move could help (said once)
  std::vector<double> straggler_pace;         // process 0: the window's medians when it named the straggler
  std::deque<double> recent_step_s;           // the latest steps' seconds (move_check's "before")
  /// Process 0: the straggler move being checked against the steps it was made for, the move
  /// (to undo it), and whether undoing it is due (said in the next step's sum).
  std::optional<move_check> checking;
  rank_move last_move;
  bool undo_due = false, undoing = false;
  bool replacement_awaited = false;  // this recovery waited for a replacement already
  /// A recovery whose re-plan is still to come (run_options::replan_on_loss): reported once
  /// the plan is settled, so its plan_after and recover_s include the re-plan.
  std::optional<recovery_record> pending_recovery;
  std::chrono::steady_clock::time_point recovery_started;
  std::string replan_note;           // what the re-plan in progress chose (for the recovery's report)
  std::vector<piece_state> initial;  // the first plan's pieces (a resumed run), until spawned
  control_proxy_hdl writer;          // writes checkpoints on its own thread
  int writes_in_flight = 0;
  /// Set when the run ends or the job's membership changes: a write waiting for another
  /// process's file gives up (a new flag for the writes after a change).
  std::shared_ptr<std::atomic<bool>> writes_cancelled = std::make_shared<std::atomic<bool>>(false);
  bool collection_waits = false;      // for the writes in flight
  std::vector<piece_layout> layouts;  // the current plan's pieces (for checkpoints)
  int layouts_of = -1;                // the plan (protocol layout) they are of
  run_summary summary;
  std::chrono::steady_clock::time_point run_start;
  caf::typed_response_promise<run_summary> done;
  static inline const char* name = "cohort.coordinator";
};

coordinator_hdl::behavior_type coordinator(coordinator_hdl::stateful_pointer<coordinator_state> self, model_ptr model,
                                           run_options options, batch_fn data, std::vector<piece_state> initial);

}  // namespace cohort::actors
