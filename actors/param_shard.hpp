// The state of a parameter actor: one contiguous piece of a stage's flat parameter buffer
// (all of it, or with shard-params the near-equal 1/dp piece this data-parallel rank owns),
// its optimizer state, and the update rule. The piece is the authoritative copy: a worker
// that is respawned after a failure refills its parameters from here. In one process the
// piece may share storage with the worker's parameters (updates are then seen at once);
// pass a clone to keep them apart.
//
//   tensor initial_piece = tensor::full({1024}, 0.5f);
//   param_shard ps(initial_piece, adamw_config{.lr = 1e-3f});
//   result<tensor> updated = ps.update(tensor::full({1024}, 0.01f));   // same length, returns the new piece
//   if (!updated) return updated.error();
//   assert(ps.steps() == 1 && updated->shares_storage_with(initial_piece));   // in place: pass a clone to keep apart
#pragma once

#include <cstdint>

#include "graph/optimizer.hpp"
#include "graph/tensor.hpp"
#include "kernels/optimizer.hpp"

namespace cohort::actors {

class param_shard {
 public:
  param_shard(tensor piece, optimizer_config cfg);
  /// A piece that continues from `state` (its optimizer slots and step count; a transition).
  param_shard(tensor piece, optimizer_config cfg, kernels::optimizer_state state);

  /// One optimizer step with `grad` (the piece's gradient, summed over the data-parallel
  /// replicas and micro-batches). Returns the updated piece (shares storage with params()).
  result<tensor> update(const tensor& grad);
  const tensor& params() const { return piece_; }
  /// Moves the piece into `storage` (same length): copies the current values there and
  /// updates `storage` from now on (a respawned worker's new parameter buffer).
  status rebind(tensor storage);
  std::int64_t steps() const { return state_.step; }
  const kernels::optimizer_state& optimizer_state() const { return state_; }

 private:
  tensor piece_;
  optimizer_config cfg_;
  kernels::optimizer_state state_;
};

}  // namespace cohort::actors
