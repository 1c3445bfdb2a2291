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
//   piece_gradient sparse;                       // a table [10, 4] at elements 8..47, one entry: row 3
//   sparse.dense = tensor::zeros({1024});
//   sparse.entries = tensor::zeros({5});         // one block: the row's i32 bits, then its 4 values
//   std::int32_t row = 3;
//   std::memcpy(sparse.entries.data<float>(), &row, sizeof row);
//   sparse.blocks = 1;
//   sparse.block_size = 5;
//   sparse.tables.push_back({/*offset=*/8, /*rows=*/10, /*dim=*/4, /*first=*/0, /*count=*/1});
//   param_shard with_table(tensor::zeros({1024}), sgd_config{.lr = 0.1f});   // plain SGD or Adagrad
//   if (auto again = with_table.update(sparse); !again) return again.error();   // of the table, row 3 only
//   sparse.local = true;                         // geo mode: row 3's value before the update is kept
//   if (auto geo = with_table.update(sparse); !geo) return geo.error();
//   assert(with_table.local(sparse.tables).counts()[0] == 1);
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "actors/local_rows.hpp"
#include "graph/optimizer.hpp"
#include "graph/tensor.hpp"
#include "kernels/optimizer.hpp"

namespace cohort::actors {

/// One embedding table's sparse gradient inside a piece's step gradient (compile_options::
/// sparse_tables): its entries lie in `piece_gradient::entries`, one block per data-parallel
/// replica (in replica order, the serial batch's order), each block holding, for this table,
/// `count` rows (i32 bits, -1: none) at `first` and then `count` x `dim` values.
struct sparse_table_grad {
  std::int64_t offset = 0;  // the table's first element in the piece (negative: it starts before)
  std::int64_t rows = 0, dim = 0;
  std::int64_t first = 0, count = 0;
  std::int64_t first_row = 0;  // a row shard's first row: entries name rows of the whole table
};

/// What a worker hands its parameter owner at the end of a step.
struct piece_gradient {
  tensor dense;    // the piece's gradient (zeros, never read, where a sparse table lies)
  tensor entries;  // the sparse tables' entries: `blocks` blocks of `block_size` elements
  std::int64_t blocks = 0, block_size = 0;
  std::vector<sparse_table_grad> tables;
  /// Geo mode: one block, this replica's own entries, and the touched rows' values before
  /// the update are kept for the next exchange (param_shard::local()).
  bool local = false;
  /// Async mode (table_exchange.hpp): the tables' entries are applied this many steps after
  /// the dense part (which is applied at the commit as always).
  std::int64_t delay = 0;
};

/// The runs of a piece of `n` elements that no table of `tables` covers, ascending (where the
/// piece's dense update rule applies).
std::vector<range> runs_outside_tables(const std::vector<sparse_table_grad>& tables, std::int64_t n);

class param_shard {
 public:
  param_shard(tensor piece, optimizer_config cfg);
  /// A piece that continues from `state` (its optimizer slots and step count; a transition).
  param_shard(tensor piece, optimizer_config cfg, kernels::optimizer_state state);

  /// One optimizer step with `grad` (the piece's gradient, summed over the data-parallel
  /// replicas and micro-batches). Returns the updated piece (shares storage with params()).
  result<tensor> update(const tensor& grad);
  /// The same with sparse tables: the dense rule on the elements no table covers, the touched
  /// rows of each table as if its gradient were dense (kernels::apply_sparse_rows).
  result<tensor> update(const piece_gradient& grad);
  /// The sparse tables' part of `grad` alone (its dense part is not read; the step count stays):
  /// async mode applies a step's table entries some steps after its dense update.
  status update_tables(const piece_gradient& grad);
  const tensor& params() const { return piece_; }
  /// Moves the piece into `storage` (same length): copies the current values there and
  /// updates `storage` from now on (a respawned worker's new parameter buffer).
  status rebind(tensor storage);
  std::int64_t steps() const { return state_.step; }
  const kernels::optimizer_state& optimizer_state() const { return state_; }
  /// Geo mode: the rows `local` gradients updated since the last exchange (one record per
  /// table of `tables`, in that order).
  local_rows& local(const std::vector<sparse_table_grad>& tables);
  /// Table `t` inside the piece; an error unless the piece holds all of it (geo mode trains
  /// whole tables, never a sharded plan's pieces).
  result<table_span> span_of(const sparse_table_grad& t);
  /// Geo mode: `values` and `slots`, a copy of this piece and its optimizer state, get the
  /// rows kept since the last exchange back as they were then, and the last exchange's rows as
  /// they were before it where its step is later than `committed` (local_rows::restore_agreed):
  /// the replicas' agreed tables.
  void restore_agreed_rows(tensor& values, std::vector<tensor>& slots, std::int64_t committed) const;

 private:
  status check_sparse(const piece_gradient& grad, bool with_dense) const;
  void prepare_layout(const piece_gradient& grad);
  status apply_tables(const piece_gradient& grad);

  tensor piece_;
  optimizer_config cfg_;
  kernels::optimizer_state state_;
  // the last sparse layout's dense runs and per-table row sums (sized once)
  std::vector<std::int64_t> layout_;
  std::vector<range> dense_runs_;
  std::vector<kernels::row_sums> sums_;
  local_rows local_;
  std::vector<sparse_table_grad> local_tables_;  // the tables local_ keeps rows of
};

}  // namespace cohort::actors
