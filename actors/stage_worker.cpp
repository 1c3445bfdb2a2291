// A stage worker's computation: slots, flat parameter and gradient buffers.
#include "actors/stage_worker.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "graph/init.hpp"

namespace cohort::actors {

result<std::unique_ptr<stage_worker>> stage_worker::create(stage_program program, int slots,
                                                           const kernels::dispatch_table* table,
                                                           kernels::thread_pool* pool, comm_context comm,
                                                           bool single_micro_batch,
                                                           std::optional<stage_program> smaller, bool larger_used) {
  if (slots < 1) return make_error(errc::invalid_argument, "stage worker: needs at least one slot");
  if (program.chunks.empty())
    return make_error(errc::invalid_argument, "stage worker: the program lists no chunk (not from partition)");
  if (!larger_used && !smaller)
    return make_error(errc::invalid_argument, "stage worker: no program to run (the larger one unused, no smaller)");
  std::unique_ptr<stage_worker> w(new stage_worker());
  w->program_ = std::move(program);
  w->comm_ = std::make_unique<comm_context>(std::move(comm));
  std::int64_t total = 0;
  for (const auto& p : w->program_.params) {
    std::int64_t n = w->program_.g.value(p.local).type.shape.numel();
    w->ranges_.push_back({total, total + n});
    total += n;
  }
  std::int64_t dense_from = 0;
  for (std::size_t i = 0; i < w->program_.params.size(); ++i) {
    const auto& p = w->program_.params[i];
    if (!p.sparse()) continue;
    const shape& table = w->program_.g.value(p.local).type.shape;
    const shape& values = w->program_.g.value(p.sparse_values).type.shape;
    if (table.rank() != 2 || values.rank() != 2 || values[1] != table[1])
      return make_error(errc::invalid_argument, "stage worker: the sparse gradient of '" + p.name + "' is " +
                                                    values.to_string() + " for a table of " + table.to_string());
    std::int64_t smaller_per_backward = values[0];
    if (smaller) {
      const shape& fewer = smaller->g.value(smaller->params[i].sparse_values).type.shape;
      if (fewer.rank() != 2 || fewer[0] > values[0])
        return make_error(errc::invalid_argument, "stage worker: the smaller micro-batch's sparse gradient of '" +
                                                      p.name + "' is " + fewer.to_string());
      smaller_per_backward = fewer[0];
    }
    w->sparse_.push_back({i, table[0], table[1], values[0], smaller_per_backward, 0, 0, p.sparse_first_row});
    if (w->ranges_[i].begin > dense_from) w->dense_runs_.push_back({dense_from, w->ranges_[i].begin});
    dense_from = w->ranges_[i].end;
  }
  if (total > dense_from) w->dense_runs_.push_back({dense_from, total});
  // each parameter's gradient is complete after the backward task of the chunk that computes it
  const auto& chunks = w->program_.chunks;
  w->chunk_params_.assign(chunks.size(), {});
  for (std::size_t i = 0; i < w->program_.params.size(); ++i) {
    const auto& p = w->program_.params[i];
    const value_id grad = p.sparse() ? p.sparse_values : p.grad;
    const auto producer = static_cast<std::size_t>(std::max(w->program_.g.value(grad).producer, 0));
    std::size_t chunk = 0;
    for (std::size_t c = 0; c < chunks.size(); ++c)
      if (producer >= chunks[c].backward_begin && producer < chunks[c].backward_end) chunk = c;
    w->chunk_params_[chunk].push_back(i);
  }
  w->flat_params_ = tensor::zeros({total});
  // the tables' ranges of the gradient buffer stay untouched (see zero_grads)
  w->flat_grads_ = w->sparse_.empty() ? tensor::zeros({total}) : tensor::empty({total});
  for (const range& r : w->dense_runs_) w->flat_grads_.slice(0, r.begin, r.end).fill(0.f);
  for (std::size_t i = 0; i < w->program_.params.size(); ++i) {
    const auto& p = w->program_.params[i];
    w->views_.emplace(p.name, tensor(w->flat_params_.storage_ptr(), w->program_.g.value(p.local).type.shape, dtype::f32,
                                     w->ranges_[i].begin));
  }
  auto kept = w->program_.kept();
  kernels::executor_options opts{table, pool, w->comm_.get(), {}};
  w->grads_in_place_ = single_micro_batch && slots == 1;
  if (w->grads_in_place_)
    for (std::size_t i = 0; i < w->program_.params.size(); ++i) {
      const auto& p = w->program_.params[i];
      if (p.sparse()) continue;
      opts.bound.emplace_back(p.grad, tensor(w->flat_grads_.storage_ptr(), w->program_.g.value(p.local).type.shape,
                                             dtype::f32, w->ranges_[i].begin));
    }
  for (int s = 0; larger_used && s < slots; ++s) {
    auto ex = kernels::executor::create(w->program_.g, w->views_, kept, opts);
    if (!ex)
      return make_error(ex.error().code, "stage " + std::to_string(w->program_.stage) + ": " + ex.error().message);
    w->exec_.push_back(std::make_unique<kernels::executor>(std::move(*ex)));
  }
  if (smaller) {  // same value ids (compile checks), its own shapes; gradients are added, never bound
    w->smaller_ = std::move(*smaller);
    w->grads_in_place_ = false;
    kernels::executor_options small_opts{table, pool, w->comm_.get(), {}};
    const auto small_kept = w->smaller_->kept();
    for (int s = 0; s < slots; ++s) {
      auto ex = kernels::executor::create(w->smaller_->g, w->views_, small_kept, small_opts);
      if (!ex)
        return make_error(ex.error().code, "stage " + std::to_string(w->program_.stage) + ": " + ex.error().message);
      w->smaller_exec_.push_back(std::make_unique<kernels::executor>(std::move(*ex)));
    }
  }
  w->slot_smaller_.assign(static_cast<std::size_t>(slots), larger_used ? 0 : 1);
  return w;
}

void stage_worker::use_smaller(int slot, bool smaller) {
  if (exec_.empty()) smaller = true;  // only the smaller program runs here
  slot_smaller_.at(static_cast<std::size_t>(slot)) = smaller && has_smaller() ? 1 : 0;
}

kernels::executor& stage_worker::exec(int slot) {
  const auto i = static_cast<std::size_t>(slot);
  return slot_smaller_.at(i) != 0 ? *smaller_exec_.at(i) : *exec_.at(i);
}

const kernels::executor& stage_worker::exec(int slot) const {
  const auto i = static_cast<std::size_t>(slot);
  return slot_smaller_.at(i) != 0 ? *smaller_exec_.at(i) : *exec_.at(i);
}

status stage_worker::load_initial_parameters(const graph& serial, std::uint64_t seed) {
  for (const auto& p : program_.params) {
    value_id id = serial.find(p.name);
    if (id == no_value) return make_error(errc::not_found, "stage worker: no parameter '" + p.name + "' in the model");
    const auto& info = serial.value(id);
    tensor full = initial_value(p.name, info.type.shape, info.init, seed);
    tensor& local = views_.at(p.name);
    if (const shard* s = as_shard(p.tp)) {
      range r = shard_part(*s, info.type.shape[s->dim], program_.tp, program_.tp_rank);
      local.copy_from(full.slice(s->dim, r.begin, r.end));
    } else {
      local.copy_from(full);
    }
  }
  return {};
}

tensor& stage_worker::grad_piece(std::int64_t n) {
  if (!grad_piece_.defined() || grad_piece_.numel() != n) grad_piece_ = tensor::zeros({n});
  return grad_piece_;
}

void stage_worker::zero_grads() {
  if (grads_in_place_) return;
  if (sparse_.empty()) {
    flat_grads_.fill(0.f);
    return;
  }
  for (const range& r : dense_runs_) flat_grads_.slice(0, r.begin, r.end).fill(0.f);
}

void stage_worker::zero_table_grads() {
  if (table_grads_zeroed_) return;
  table_grads_zeroed_ = true;
  for (const auto& t : sparse_) flat_grads_.slice(0, ranges_[t.param].begin, ranges_[t.param].end).fill(0.f);
}

void stage_worker::begin_sparse_step(int backwards, int blocks, int block) {
  backward_index_ = 0;
  if (sparse_.empty()) return;
  if (backwards == backwards_ && blocks == blocks_ && entries_.defined()) {
    block_ = block;
    return;
  }
  backwards_ = backwards;
  blocks_ = blocks;
  block_ = block;
  std::int64_t at = 0;
  for (auto& t : sparse_) {
    t.first = at;
    t.count = t.per_backward * backwards;
    at += t.count * (1 + t.dim);
  }
  block_size_ = at;
  entries_ = tensor::zeros({std::max<std::int64_t>(block_size_ * blocks, 1)});
}

tensor& stage_worker::input(int slot, value_id local) { return exec(slot).input(local); }

const tensor& stage_worker::value(int slot, value_id local) const { return exec(slot).value(local); }

status stage_worker::forward(int slot, int chunk) {
  const auto& c = program_.chunks.at(static_cast<std::size_t>(chunk));
  return exec(slot).run(c.forward_begin, c.forward_end);
}

status stage_worker::backward(int slot, float seed, int chunk) {
  auto& ex = exec(slot);
  const bool smaller = slot_smaller_.at(static_cast<std::size_t>(slot)) != 0;
  if (program_.seed != no_value && chunk == program_.loss_chunk) ex.input(program_.seed).fill(seed);
  const auto& c = program_.chunks.at(static_cast<std::size_t>(chunk));
  if (auto st = ex.run(c.backward_begin, c.backward_end); !st) return st;
  if (!sparse_.empty()) {  // this backward's entries, after the earlier ones of the step
    if (backward_index_ >= backwards_)
      return make_error(errc::invalid_argument, "stage worker: more backward tasks than the step announced (" +
                                                    std::to_string(backwards_) + ")");
    float* block = entries_.data<float>() + block_ * block_size_;
    for (const auto& t : sparse_) {
      const auto& p = program_.params[t.param];
      const tensor& rows = ex.value(p.sparse_rows);
      const tensor& values = ex.value(p.sparse_values);
      // every backward has the room of the largest micro-batch's entries (the replicas' blocks
      // are gathered as equal parts); a smaller one fills the rest with no row (-1) and zeros
      const std::int64_t n = smaller ? t.smaller_per_backward : t.per_backward;
      float* row_at = block + t.first + backward_index_ * t.per_backward;
      float* value_at = block + t.first + t.count + backward_index_ * t.per_backward * t.dim;
      std::memcpy(row_at, rows.data<std::int32_t>(), static_cast<std::size_t>(n) * sizeof(std::int32_t));
      std::memcpy(value_at, values.data<float>(), static_cast<std::size_t>(n * t.dim) * sizeof(float));
      const std::int32_t none = -1;
      for (std::int64_t k = n; k < t.per_backward; ++k) std::memcpy(row_at + k, &none, sizeof none);
      std::fill(value_at + n * t.dim, value_at + t.per_backward * t.dim, 0.f);
    }
    ++backward_index_;
  }
  float* acc = flat_grads_.data<float>();
  for (const std::size_t i : chunk_params_.at(static_cast<std::size_t>(chunk))) {
    if (program_.params[i].sparse()) continue;
    if (ex.is_bound(program_.params[i].grad)) continue;  // computed in place
    const float* g = ex.value(program_.params[i].grad).data<float>();
    float* dst = acc + ranges_[i].begin;
    for (std::int64_t j = 0, n = ranges_[i].size(); j < n; ++j) dst[j] += g[j];
  }
  return {};
}

}  // namespace cohort::actors
