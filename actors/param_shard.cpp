// Parameter pieces and their optimizer state.
#include "actors/param_shard.hpp"

#include <algorithm>
#include <string>

namespace cohort::actors {

std::vector<range> runs_outside_tables(const std::vector<sparse_table_grad>& tables, std::int64_t n) {
  std::vector<range> covered;
  for (const auto& t : tables)
    covered.push_back(
        {std::clamp<std::int64_t>(t.offset, 0, n), std::clamp<std::int64_t>(t.offset + t.rows * t.dim, 0, n)});
  std::sort(covered.begin(), covered.end(), [](const range& a, const range& b) { return a.begin < b.begin; });
  std::vector<range> runs;
  std::int64_t at = 0;
  for (const range& c : covered) {
    if (c.begin > at) runs.push_back({at, c.begin});
    at = std::max(at, c.end);
  }
  if (at < n) runs.push_back({at, n});
  return runs;
}

param_shard::param_shard(tensor piece, optimizer_config cfg)
    : piece_(std::move(piece)), cfg_(cfg), state_(kernels::make_state(piece_, cfg)) {}

param_shard::param_shard(tensor piece, optimizer_config cfg, kernels::optimizer_state state)
    : piece_(std::move(piece)), cfg_(cfg), state_(std::move(state)) {}

result<tensor> param_shard::update(const tensor& grad) {
  if (grad.numel() != piece_.numel())
    return make_error(errc::invalid_argument, "parameter update: gradient piece of " + std::to_string(grad.numel()) +
                                                  " elements for a piece of " + std::to_string(piece_.numel()));
  kernels::apply_update(piece_, grad, state_, cfg_);
  return piece_;
}

status param_shard::check_sparse(const piece_gradient& grad, bool with_dense) const {
  const std::int64_t n = piece_.numel();
  if (with_dense && grad.dense.numel() != n)
    return make_error(errc::invalid_argument, "parameter update: gradient piece of " +
                                                  std::to_string(grad.dense.numel()) + " elements for a piece of " +
                                                  std::to_string(n));
  if (grad.blocks < 0 || grad.block_size < 0 || grad.entries.numel() < grad.blocks * grad.block_size)
    return make_error(errc::invalid_argument, "parameter update: sparse entries shorter than their blocks");
  if (!grad.tables.empty()) {
    if (const std::string why = kernels::sparse_update_problem(cfg_); !why.empty())
      return make_error(errc::invalid_argument,
                        "parameter update: sparse table gradients need plain SGD or Adagrad: " + why);
  }
  for (const auto& t : grad.tables)
    if (t.rows < 0 || t.dim < 1 || t.count < 0 || t.first < 0 || t.first_row < 0 ||
        t.first + t.count * (1 + t.dim) > grad.block_size)
      return make_error(errc::invalid_argument, "parameter update: a sparse table's entries lie outside their block");
  return {};
}

void param_shard::prepare_layout(const piece_gradient& grad) {
  const std::int64_t n = piece_.numel();
  // The dense runs: what no table covers (computed again only when the tables change).
  std::vector<std::int64_t> layout;
  for (const auto& t : grad.tables) layout.insert(layout.end(), {t.offset, t.rows, t.dim, t.first_row});
  if (layout != layout_) {
    layout_ = std::move(layout);
    dense_runs_ = runs_outside_tables(grad.tables, n);
    sums_.clear();
  }
  // the row sums, sized for the most entries seen (a geo or async step brings fewer)
  if (sums_.size() != grad.tables.size()) sums_.clear();
  for (std::size_t i = 0; i < grad.tables.size(); ++i) {
    const auto& t = grad.tables[i];
    const std::int64_t need = std::max<std::int64_t>(grad.blocks * t.count, 1);
    if (i < sums_.size() && sums_[i].capacity() >= need) continue;
    if (i < sums_.size())
      sums_[i] = kernels::row_sums(need, t.dim);
    else
      sums_.emplace_back(need, t.dim);
  }
}

status param_shard::apply_tables(const piece_gradient& grad) {
  const std::int64_t n = piece_.numel();
  float* slot = std::holds_alternative<adagrad_config>(cfg_) ? state_.slots[0].data<float>() : nullptr;
  const float* entries = grad.blocks > 0 ? grad.entries.data<float>() : nullptr;
  for (std::size_t i = 0; i < grad.tables.size(); ++i) {
    const auto& t = grad.tables[i];
    auto& sums = sums_[i];
    sums.clear();
    for (std::int64_t b = 0; b < grad.blocks; ++b) {
      const float* block = entries + b * grad.block_size + t.first;
      sums.add(reinterpret_cast<const std::int32_t*>(block), block + t.count, t.count);
    }
    if (grad.local) {
      auto span = span_of(t);
      if (!span) return span.error();
      local(grad.tables).keep(i, *span, sums.rows(), sums.size());
    }
    kernels::apply_sparse_rows(piece_.data<float>(), n, slot, t.offset, t.first_row, t.rows, t.dim, sums, cfg_);
  }
  return {};
}

result<tensor> param_shard::update(const piece_gradient& grad) {
  if (grad.tables.empty()) return update(grad.dense);
  if (auto st = check_sparse(grad, true); !st) return st.error();
  prepare_layout(grad);
  if (auto st = apply_tables(grad); !st) return st.error();
  kernels::apply_update_runs(piece_, grad.dense, state_, cfg_, dense_runs_);  // the step count rises once
  return piece_;
}

status param_shard::update_tables(const piece_gradient& grad) {
  if (auto st = check_sparse(grad, false); !st) return st;
  prepare_layout(grad);
  return apply_tables(grad);
}

local_rows& param_shard::local(const std::vector<sparse_table_grad>& tables) {
  if (local_.tables() != tables.size()) {  // a piece's tables keep their place from step to step
    local_ = local_rows(tables.size());
    local_tables_ = tables;
  }
  return local_;
}

void param_shard::restore_agreed_rows(tensor& values, std::vector<tensor>& slots, std::int64_t committed) const {
  if (local_.tables() == 0 || values.numel() != piece_.numel()) return;  // (empty: the last merge may undo)
  const bool with_state = std::holds_alternative<adagrad_config>(cfg_) && !slots.empty();
  std::vector<table_span> spans;
  for (const auto& t : local_tables_) {
    if (t.offset < 0 || t.offset + t.rows * t.dim > values.numel()) return;  // (kept only for whole tables)
    spans.push_back({values.data<float>() + t.offset, t.rows, t.dim, t.first_row,
                     with_state ? slots[0].data<float>() + t.offset : nullptr});
  }
  local_.restore_agreed(spans, committed);
}

result<table_span> param_shard::span_of(const sparse_table_grad& t) {
  if (t.offset < 0 || t.offset + t.rows * t.dim > piece_.numel())
    return make_error(errc::invalid_argument,
                      "parameter update: a table's local rows need the whole table in the piece (geo mode trains "
                      "full replicas, not a sharded plan's pieces)");
  float* state = std::holds_alternative<adagrad_config>(cfg_) ? state_.slots[0].data<float>() + t.offset : nullptr;
  return table_span{piece_.data<float>() + t.offset, t.rows, t.dim, t.first_row, state};
}

status param_shard::rebind(tensor storage) {
  if (storage.numel() != piece_.numel())
    return make_error(errc::invalid_argument, "parameter rebind: storage of " + std::to_string(storage.numel()) +
                                                  " elements for a piece of " + std::to_string(piece_.numel()));
  if (!storage.shares_storage_with(piece_) || storage.offset() != piece_.offset()) storage.copy_from(piece_);
  piece_ = std::move(storage);
  return {};
}

}  // namespace cohort::actors
