// The parameter actor: owns one worker's piece of parameters and its optimizer state (a
// `parameter_piece`). Gradients arrive at the end of a step and wait. Once the coordinator
// has seen every worker finish step k, step k is committed, and the waiting gradient is
// applied exactly once, in place, into the worker's parameter storage — by the worker at the
// start of its next step (its own thread, its caches warm: the piece is lent to it at attach),
// or by the parameter actor when a recovery or the end of the run finds it still waiting.
// A failed step is never committed: its gradient is dropped, nothing is ever undone, and
// gradients from an older generation are refused. In async mode (piece_gradient::delay = S)
// the committed step's dense part is applied as always and its tables' entries wait S more
// commits (tables_through() is the version a lookup reads); a rollback keeps them waiting, a
// fetch or export (the state read whole) applies them first.
//
//   auto p = sys.spawn(param_actor, optimizer_config{adamw_config{.lr = 1e-3f}},
//                      std::optional<piece_state>{}, /*generation=*/std::int64_t{0});   // spawn passes every argument
//   caf::scoped_actor worker{sys};
//   status failed;
//   auto on_error = [&](caf::error& e) { failed = from_caf(e); };
//   piece_ptr piece;
//   tensor storage = tensor::zeros({256});                 // the worker's piece of its flat parameters
//   worker->request(p, 10s, attach_atom::value, storage).receive([&](piece_ptr& lent) { piece = lent; }, on_error);
//   piece_gradient grad;                                   // dense, and sparse tables' entries if any
//   grad.dense = tensor::full({256}, 0.1f);
//   worker->request(p, 10s, update_atom::value, /*generation=*/std::int64_t{0}, /*step=*/std::int64_t{0}, grad)
//       .receive([](ok_atom) {}, on_error);                 // the gradient waits
//   if (!failed) return failed;
//   if (auto st = piece->apply_committed(/*committed=*/0); !st) return st;   // start of step 1: into storage
//   // coordinator: (rollback_atom, g', committed) ; (fetch_atom, committed) => tensor
//   //              (export_atom, committed) => piece_state    // a plan transition takes the state
// A parameter actor spawned with a piece_state (a plan transition's new piece) starts from it:
// the first attach fills the worker's storage with its values, its optimizer state continues.
// Until then an export, fetch or snapshot reads that state (a re-plan may follow a recovery
// before the new workers have attached).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "actors/messages.hpp"
#include "actors/param_shard.hpp"
#include "actors/state_layout.hpp"

namespace cohort::actors {

/// The piece and its pending gradient behind a lock (the actor and its worker share it).
class parameter_piece {
 public:
  /// `generation`: the run's generation when the piece is made (a plan spawned after a
  /// recovery takes gradients of that generation on).
  explicit parameter_piece(optimizer_config cfg, std::optional<piece_state> initial = std::nullopt,
                           std::int64_t generation = 0)
      : optimizer_(cfg), initial_(std::move(initial)), generation_(generation) {}

  /// The first attach adopts `storage` with its values; a later one (a respawned worker)
  /// refills `storage` with the current values and updates it from then on.
  status attach(tensor storage);
  /// Keeps `grad` for step `step` of generation `generation` until it is committed.
  status submit(std::int64_t generation, std::int64_t step, piece_gradient grad);
  /// A dense gradient alone.
  status submit(std::int64_t generation, std::int64_t step, tensor grad) {
    piece_gradient g;
    g.dense = std::move(grad);
    return submit(generation, step, std::move(g));
  }
  /// Applies the waiting gradient if its step is at most `committed` (once).
  status apply_committed(std::int64_t committed);
  /// A new generation: applies what was committed, drops what was not.
  status rollback(std::int64_t new_generation, std::int64_t committed);
  /// The current piece (after applying what was committed, and what async mode keeps waiting):
  /// the live storage itself, no copy — the end of a run's collection (it changes if training
  /// went on; a 2 GB table is not copied to be read once).
  result<tensor> fetch(std::int64_t committed);
  /// The piece's values and optimizer state (after applying what was committed), copied. In
  /// geo mode the rows this replica changed on its own since the replicas last exchanged are
  /// copied as they were then (their kept bases): the copy is the state every replica agreed
  /// on, which is all there is to carry (a plan change or a checkpoint exchanges first, so
  /// nothing is kept then; a recovery drops every replica's updates since the exchange).
  result<piece_state> export_state(std::int64_t committed);
  std::int64_t updates() const;
  /// A buddy copy (replicas.hpp) starts from another process's piece: its values, optimizer
  /// state and steps, owned here; it then takes the same gradients and applies them at the
  /// same commits, so it stays bit-identical to the piece it copies.
  void seed(piece_state state);
  /// Whether the piece has values (attached or seeded), and how many.
  bool holds_values() const;
  std::int64_t size() const;
  /// The piece as it stands (nothing applied: what the next commit's update starts from),
  /// copied. Errors: nothing attached, or async mode's table entries still waiting (a copy
  /// could not carry them).
  result<piece_state> snapshot() const;
  /// Geo mode (table_exchange.hpp): runs `f` on the piece's kept local rows and the spans of
  /// `tables` inside it, under the piece's lock (never across a collective: count, pack and
  /// merge are separate calls).
  status with_local_rows(const std::vector<sparse_table_grad>& tables,
                         const std::function<void(local_rows&, const std::vector<table_span>&)>& f);

  /// Steps whose tables' updates are in the piece (the version a lookup reads): the steps done
  /// in sync mode, `staleness` fewer in async mode.
  std::int64_t tables_through() const;

 private:
  /// `drain`: async mode's delayed table entries too, all of them (the state is read whole).
  status apply_locked(std::int64_t committed, bool drain = false);
  piece_state copy_locked() const;  // values, slots and steps, copied (attached, or the initial state)

  mutable std::mutex mutex_;
  optimizer_config optimizer_;
  std::optional<piece_state> initial_;  // until the first attach
  std::unique_ptr<param_shard> shard_;
  std::int64_t generation_ = 0;
  piece_gradient pending_;
  std::int64_t pending_step_ = -1;
  // async mode: committed steps' table entries waiting for their turn (ascending steps)
  std::deque<std::pair<std::int64_t, piece_gradient>> delayed_;
  std::int64_t delay_ = 0;
  std::int64_t tables_through_ = 0;
};

struct param_state {
  piece_ptr piece;
  static inline const char* name = "cohort.params";
};

param_actor_hdl::behavior_type param_actor(param_actor_hdl::stateful_pointer<param_state> self,
                                           optimizer_config optimizer,
                                           std::optional<piece_state> initial = std::nullopt,
                                           std::int64_t generation = 0);

}  // namespace cohort::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::piece_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::piece_state)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::piece_gradient)
