// Where a plan keeps its training state, parameter by parameter. Each rank's parameter actor
// owns one contiguous piece of its stage's flat parameter buffer (all of it, or its 1/dp
// share when sharded) and the optimizer state of that piece; a piece_layout says which
// elements of which parameters it holds (graph/flat_runs.hpp). Between any two layouts of one
// model — any degrees, any cuts, sharded or not — plan_state_transfer lists the copies that
// fill every new piece from the old ones: the reshard a plan transition executes, and what a
// checkpoint records per piece.
//
//   auto old_model = compile(tiny_mlp, {.dp = 2, .shard_params = true}, /*batch=*/64);
//   auto new_model = compile(tiny_mlp, {.pp = 2}, 64);
//   if (!old_model) return old_model.error();      // a plan the model cannot take, named
//   if (!new_model) return new_model.error();
//   auto from = piece_layouts(*old_model);            // one per rank of the old plan
//   auto to = piece_layouts(*new_model);
//   if (!from) return from.error();
//   if (!to) return to.error();
//   auto copies = plan_state_transfer(*from, *to);     // {from_rank, to_rank, from, to, count}
//   if (!copies) return copies.error();
//   std::vector<piece_state> old_states;               // by old rank: each parameter actor's export_state
//   for (const piece_layout& l : *from) old_states.push_back({tensor::zeros({l.size}), {}, /*steps=*/10});
//   std::vector<piece_state> moved = apply_state_transfer(*copies, old_states, *to, /*slots=*/0, /*steps=*/10);
//   std::vector<int> kept = kept_pieces(*from, *to, {0, 0}, {0, 0});   // -1, -1: no piece stays as it was
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/compile.hpp"
#include "graph/flat_runs.hpp"
#include "graph/shape.hpp"
#include "graph/tensor.hpp"

namespace cohort::actors {

/// One parameter's part of a rank's piece.
struct param_part {
  std::string name;
  shape whole;              // the parameter's global shape
  runs elements;            // which of its elements, in the piece's order
  std::int64_t offset = 0;  // where the part starts in the piece
  /// Whether this part is the copy a transfer reads: in a primary piece, and sharded over tp
  /// or on tp rank 0 (a parameter replicated over tp has identical copies on every tp rank).
  bool source = false;
};

/// What one rank's parameter actor owns.
struct piece_layout {
  int rank = 0;
  std::int64_t size = 0;  // elements of the piece
  /// Whether this piece is the copy that counts: every piece of a sharded plan, data-parallel
  /// replica 0's otherwise (the other replicas hold identical copies).
  bool primary = false;
  std::vector<param_part> parts;
};

/// Every rank's piece, in rank order. Errors: a stage program that cannot be partitioned.
result<std::vector<piece_layout>> piece_layouts(const compiled_model& cm);

/// A piece's training state: its parameter values and optimizer state (state_slots(optimizer)
/// tensors shaped like it) after `steps` updates.
struct piece_state {
  tensor values;
  std::vector<tensor> slots;
  std::int64_t steps = 0;
};

/// One copy of `count` elements from offset `from` of old rank `from_rank`'s piece to offset
/// `to` of new rank `to_rank`'s piece (the same offsets in values and every slot).
struct state_copy {
  int from_rank = 0, to_rank = 0;
  std::int64_t from = 0, to = 0, count = 0;
};

/// The copies that fill every piece of `to` from the primary pieces of `from`, grouped by
/// destination rank. Errors: a parameter of `to` that `from` does not have, or does not have
/// whole (different models), or of another shape.
result<std::vector<state_copy>> plan_state_transfer(const std::vector<piece_layout>& from,
                                                    const std::vector<piece_layout>& to);

/// Whether two pieces hold the same elements of the same parameters at the same offsets: the
/// parameter actor that owns one can serve the other as it is.
bool same_elements(const piece_layout& a, const piece_layout& b);

/// A plan transition's parameter actors that stay: for each rank of `to`, the rank of `from`
/// whose actor keeps serving it (the same elements, on the same process: `old_owner` and
/// `new_owner` give each rank's process), -1 where a new actor is filled by copies. Each old
/// rank serves one new rank at most, the one of its own number first.
std::vector<int> kept_pieces(const std::vector<piece_layout>& from, const std::vector<piece_layout>& to,
                             const std::vector<int>& old_owner, const std::vector<int>& new_owner);

/// `copies` less those into new ranks that keep their actor (kept[rank] >= 0).
std::vector<state_copy> without_kept(const std::vector<state_copy>& copies, const std::vector<int>& kept);

/// A zeroed piece of `size` elements with `slots` optimizer slots that has had `steps` updates.
piece_state empty_piece(std::int64_t size, std::size_t slots, std::int64_t steps);

/// One copy from `src` into `dst`: the values and each of `slots` optimizer slots.
void apply_copy(const state_copy& c, const piece_state& src, piece_state& dst, std::size_t slots);

/// In one process: the new pieces, filled by `copies` from `old` (by old rank; only the
/// copies' sources are read). Every new piece has `slots` optimizer slots and has had `steps`
/// updates; a rank that keeps its actor (kept[rank] >= 0, `kept` empty: none) is left empty.
std::vector<piece_state> apply_state_transfer(const std::vector<state_copy>& copies,
                                              const std::vector<piece_state>& old, const std::vector<piece_layout>& to,
                                              std::size_t slots, std::int64_t steps, const std::vector<int>& kept = {});

/// Bytes a copy list moves for values and `slots` optimizer slots (f32).
double transfer_bytes(const std::vector<state_copy>& copies, std::size_t slots);

}  // namespace cohort::actors
