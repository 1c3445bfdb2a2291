// Optimizer arithmetic for the rules of graph/optimizer.hpp, matching torch.optim.SGD,
// torch.optim.AdamW and torch.optim.Adagrad (PyTorch 1.13, single-tensor path) operation for
// operation.
//
//   tensor param = tensor::full({4}, 1.f), grad = tensor::full({4}, 0.5f);
//   optimizer_config cfg = adamw_config{.lr = 0.01f};
//   optimizer_state st = make_state(param, cfg);     // zeroed slots (exp_avg, exp_avg_sq), step 0
//   apply_update(param, grad, st, cfg);              // in place; st.step becomes 1
//   assert(st.step == 1 && st.slots.size() == 2);
//   row_sums touched(/*entries=*/5, /*dim=*/4);                // an embedding table's sparse gradient
//   std::int32_t rows[3] = {2, -1, 2};
//   std::vector<float> values(12, 0.5f);
//   touched.gather(rows, values.data(), 3);                     // one row (2), its values summed: 1.0
//   std::int32_t bag_ids[2] = {4, 2};                           // or one bag's ids and its output
//   std::vector<float> dy(4, 0.25f);                            // gradient, without the entries
//   touched.add_bags(bag_ids, /*bags=*/1, /*length=*/2, dy.data(), /*mean=*/false);   // row 2: 1.25
//   tensor table = tensor::full({5, 4}, 1.f);
//   optimizer_state none = make_state(table, sgd_config{.lr = 0.1f});
//   apply_sparse_update(table, touched, none, sgd_config{.lr = 0.1f});   // row 2 becomes 0.875
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/optimizer.hpp"
#include "graph/placement.hpp"
#include "graph/tensor.hpp"

namespace cohort::kernels {

struct optimizer_state {
  std::vector<tensor> slots;  // sgd: [momentum buffer]; adamw: [exp_avg, exp_avg_sq]
  std::int64_t step = 0;      // updates applied so far
};

optimizer_state make_state(const tensor& param, const optimizer_config& cfg);

/// One update of `param` (contiguous f32) from `grad` (same shape). Allocates nothing.
void apply_update(tensor& param, const tensor& grad, optimizer_state& state, const optimizer_config& cfg);

/// Why `cfg` cannot update a table from its touched rows alone ("" when it can: plain SGD,
/// Adagrad): an update that moves untouched rows too (momentum, weight decay, AdamW) would
/// differ from the dense one.
std::string sparse_update_problem(const optimizer_config& cfg);

/// A sparse gradient's entries (row, values) summed by row, in the order rows first appear,
/// in buffers sized once for `entries` entries of `dim` values (nothing allocated per step).
class row_sums {
 public:
  row_sums(std::int64_t entries, std::int64_t dim);
  /// Sums the entries (row -1: none) as the dense gradient kernel adds them: clear() then add().
  void gather(const std::int32_t* rows, const float* values, std::int64_t n);
  /// Forgets the rows summed so far.
  void clear();
  /// Adds more entries after those already summed (at most `entries` in all since clear()).
  void add(const std::int32_t* rows, const float* values, std::int64_t n);
  /// Adds an embedding_bag's gradient without its entries: `bags` bags of `length` ids (-1:
  /// padding) whose output gradient is `output_grad` [bags, dim]; each id's entry is its bag's
  /// row (divided by the bag's count for a mean), summed bit for bit as add() sums the
  /// entries embedding_bag_sparse_grad would write (at most `entries` ids in all).
  void add_bags(const std::int32_t* ids, std::int64_t bags, std::int64_t length, const float* output_grad, bool mean);
  std::int64_t capacity() const { return static_cast<std::int64_t>(rows_.size()); }
  std::int64_t size() const { return distinct_; }
  const std::int32_t* rows() const { return rows_.data(); }
  const float* sums() const { return sums_.data(); }

 private:
  std::int64_t dim_, distinct_ = 0;
  std::vector<std::int32_t> keys_, slot_of_key_, rows_;  // open addressing: row -> slot
  std::vector<float> sums_;
};

/// The update of `table` [V,D] from its touched rows: bit for bit the dense update by a
/// gradient that is `sums` on those rows and zero elsewhere (sparse_update_problem(cfg) == "").
void apply_sparse_update(tensor& table, const row_sums& sums, optimizer_state& state, const optimizer_config& cfg);

/// apply_update on the elements [begin, end) of each run of `param` alone (ascending, inside
/// it); the other elements and their state stay as they are. The step count rises once.
void apply_update_runs(tensor& param, const tensor& grad, optimizer_state& state, const optimizer_config& cfg,
                       const std::vector<range>& runs);

/// A table of `rows` x `dim` holding rows [first_row, first_row + rows) of a larger one (0 for
/// a whole table) that starts at element `table_offset` of a flat piece of `piece_size`
/// elements (negative or past the end where the piece holds only part of it): updates the
/// touched rows' elements that lie in the piece, as apply_sparse_update does (bit for bit
/// the dense update; sparse_update_problem(cfg) == ""); other rows are another shard's.
/// `slot` is the piece's Adagrad sum (nullptr for SGD). The step count is the caller's.
void apply_sparse_rows(float* piece, std::int64_t piece_size, float* slot, std::int64_t table_offset,
                       std::int64_t first_row, std::int64_t rows, std::int64_t dim, const row_sums& sums,
                       const optimizer_config& cfg);

}  // namespace cohort::kernels
