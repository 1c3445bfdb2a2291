// A stage worker's computation: slots, flat parameter and gradient buffers.
#include "actors/stage_worker.hpp"

#include <string>

#include "graph/init.hpp"

namespace cohort::actors {

result<std::unique_ptr<stage_worker>> stage_worker::create(stage_program program, int slots,
                                                           const kernels::dispatch_table* table,
                                                           kernels::thread_pool* pool, comm_context comm,
                                                           bool single_micro_batch) {
  if (slots < 1) return make_error(errc::invalid_argument, "stage worker: needs at least one slot");
  std::unique_ptr<stage_worker> w(new stage_worker());
  w->program_ = std::move(program);
  w->comm_ = std::make_unique<comm_context>(std::move(comm));
  std::int64_t total = 0;
  for (const auto& p : w->program_.params) {
    std::int64_t n = w->program_.g.value(p.local).type.shape.numel();
    w->ranges_.push_back({total, total + n});
    total += n;
  }
  w->flat_params_ = tensor::zeros({total});
  w->flat_grads_ = tensor::zeros({total});
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
      opts.bound.emplace_back(p.grad, tensor(w->flat_grads_.storage_ptr(), w->program_.g.value(p.local).type.shape,
                                             dtype::f32, w->ranges_[i].begin));
    }
  for (int s = 0; s < slots; ++s) {
    auto ex = kernels::executor::create(w->program_.g, w->views_, kept, opts);
    if (!ex)
      return make_error(ex.error().code, "stage " + std::to_string(w->program_.stage) + ": " + ex.error().message);
    w->exec_.push_back(std::make_unique<kernels::executor>(std::move(*ex)));
  }
  return w;
}

status stage_worker::load_initial_parameters(const graph& serial, std::uint64_t seed) {
  for (const auto& p : program_.params) {
    value_id id = serial.find(p.name);
    if (id == no_value) return make_error(errc::not_found, "stage worker: no parameter '" + p.name + "' in the model");
    const auto& info = serial.value(id);
    tensor full = initial_value(p.name, info.type.shape, info.init, seed);
    tensor& local = views_.at(p.name);
    if (const shard* s = as_shard(p.tp)) {
      range r = shard_range(info.type.shape[s->dim], program_.tp, program_.tp_rank, s->granule);
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

tensor& stage_worker::input(int slot, value_id local) { return exec_.at(static_cast<std::size_t>(slot))->input(local); }

const tensor& stage_worker::value(int slot, value_id local) const {
  return exec_.at(static_cast<std::size_t>(slot))->value(local);
}

status stage_worker::forward(int slot) {
  return exec_.at(static_cast<std::size_t>(slot))->run(0, program_.backward_begin);
}

status stage_worker::backward(int slot, float seed) {
  auto& ex = *exec_.at(static_cast<std::size_t>(slot));
  if (program_.seed != no_value) ex.input(program_.seed).fill(seed);
  if (auto st = ex.run(program_.backward_begin, program_.g.nodes().size()); !st) return st;
  float* acc = flat_grads_.data<float>();
  for (std::size_t i = 0; i < program_.params.size(); ++i) {
    if (ex.is_bound(program_.params[i].grad)) continue;  // computed in place
    const float* g = ex.value(program_.params[i].grad).data<float>();
    float* dst = acc + ranges_[i].begin;
    for (std::int64_t j = 0, n = ranges_[i].size(); j < n; ++j) dst[j] += g[j];
  }
  return {};
}

}  // namespace cohort::actors
