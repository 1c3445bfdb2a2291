// Geo mode's record of the embedding-table rows one data-parallel replica updated on its own
// since the replicas last exchanged (--exec.mode=geo): each such row's value at its first
// update (its base). An exchange packs every kept row's delta (now - base), gathers every
// replica's block, and sets each row that any replica touched to base + the deltas in replica
// order. Every replica does the same float operations on the same numbers (a row no replica
// touched locally is its base everywhere), so after an exchange the replicas' tables agree
// bit for bit; between exchanges each trains its own copy.
//
//   std::vector<float> table(10 * 4, 1.f);                      // rows 0..9 of dimension 4
//   const std::vector<table_span> tables{{table.data(), /*rows=*/10, /*dim=*/4, /*first_row=*/0}};
//   local_rows kept(1);                                          // one table
//   std::int32_t touched[] = {3, 7};
//   kept.keep(0, tables[0], touched, 2);                         // before the local update
//   table[3 * 4] = 0.5f;                                         // ... the update
//   std::vector<float> block(static_cast<std::size_t>(kept.packed_size(tables)));
//   kept.pack(tables, block.data());                             // counts, rows 3 and 7, their deltas
//   const std::vector<packed_block> every{{block.data(), static_cast<std::int64_t>(block.size())}};  // here one replica
//   if (auto st = kept.merge(tables, every); !st) return st;     // base + delta: 1 + -0.5
//   assert(table[3 * 4] == 0.5f && kept.empty());
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "graph/error.hpp"

namespace cohort::actors {

/// Rows [first_row, first_row + rows) of an embedding table, `dim` values each, in memory,
/// and the optimizer's per-element state beside them where it has one (Adagrad's sums: a
/// row's state moves with the row, so that replicas that agree on both update alike).
struct table_span {
  float* values = nullptr;
  std::int64_t rows = 0, dim = 0, first_row = 0;
  float* state = nullptr;  // same layout as values; null: none
  bool holds(std::int32_t row) const { return row >= first_row && row < first_row + rows; }
  float* row(std::int32_t r) const { return values + (r - first_row) * dim; }
  /// Floats a row's record holds: its values, then its state's.
  std::int64_t width() const { return state != nullptr ? 2 * dim : dim; }
  void read(std::int32_t r, float* out) const;
  void write(std::int32_t r, const float* in) const;
};

/// How a block carries its deltas: f32 as they are, or bf16 (rounded to nearest even: half the
/// bytes; every replica merges the deltas as sent, its own included, so replicas still agree
/// bit for bit — each loses the rounding of its own delta).
enum class delta_encoding : std::int32_t { f32 = 0, bf16 = 1 };

/// One replica's packed block as it arrived.
struct packed_block {
  const float* data = nullptr;
  std::int64_t size = 0;
};

class local_rows {
 public:
  explicit local_rows(std::size_t tables = 0) : tables_(tables) {}

  /// Keeps the current values of those of `rows` (global row ids; -1: none) that table `t`
  /// holds and that are not kept yet: call it before the update that changes them.
  void keep(std::size_t t, const table_span& table, const std::int32_t* rows, std::int64_t n);
  bool empty() const;
  std::size_t tables() const { return tables_.size(); }
  /// The rows kept, per table.
  std::vector<std::int64_t> counts() const;
  /// Elements of this replica's packed block: its encoding, one count per table (i32 bits),
  /// then per table its kept rows (i32 bits) and their deltas (now - base, table_span::width()
  /// each; with bf16 two to a float).
  std::int64_t packed_size(const std::vector<table_span>& tables, delta_encoding e = delta_encoding::f32) const;
  void pack(const std::vector<table_span>& tables, float* out, delta_encoding e = delta_encoding::f32) const;
  /// Every replica's block (in replica order, this one's among them; they come from the
  /// network and are validated first: nothing changes unless all are well-formed): each row
  /// named anywhere becomes its base plus the deltas, added in block order. Forgets the kept rows,
  /// and remembers what the merged rows were before it, as the exchange before step `step` (until
  /// the next merge): a recovery that redoes that step undoes it (restore_agreed).
  status merge(const std::vector<table_span>& tables, const std::vector<packed_block>& blocks,
               delta_encoding e = delta_encoding::f32, std::int64_t step = -1);
  /// Forgets the kept rows (their updates stay; a plan whose replicas agree again).
  void clear();
  /// Writes into `tables` — copies of the tables this record was kept for — what the replicas
  /// last agreed on with `committed` the last step committed: every kept row at its base, and
  /// where the last merge was the exchange of a step not committed (a failure in that step may
  /// have stopped the exchange on some replicas and not on others), every row it merged as it
  /// was before it. Every replica then holds the same tables, whichever had merged.
  void restore_agreed(const std::vector<table_span>& tables, std::int64_t committed) const;

 private:
  struct kept_rows {
    std::vector<std::int32_t> rows;   // in first-update order
    std::vector<float> base;          // rows.size() x width
    std::vector<std::uint64_t> seen;  // one bit per table row (the row - first_row): kept
    std::int64_t first_row = 0;
    bool has(std::int64_t at) const { return (seen[static_cast<std::size_t>(at >> 6)] >> (at & 63)) & 1; }
  };
  std::vector<kept_rows> tables_;
  struct merged_rows {  // one table's rows the last merge changed, and their records before it
    std::vector<std::int32_t> rows;
    std::vector<float> before;  // rows.size() x width
  };
  std::vector<merged_rows> last_merge_;
  std::int64_t last_merge_step_ = -1;  // the step whose exchange it was (-1: none)
};

}  // namespace cohort::actors
