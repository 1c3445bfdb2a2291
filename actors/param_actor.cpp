// The parameter actor and the piece it lends to its worker.
#include "actors/param_actor.hpp"

namespace cohort::actors {

status parameter_piece::attach(tensor storage) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!shard_) {
    if (!initial_) {
      shard_ = std::make_unique<param_shard>(std::move(storage), optimizer_);
      return {};
    }
    if (initial_->values.numel() != storage.numel())
      return make_error(errc::invalid_argument, "parameters: a piece of " + std::to_string(initial_->values.numel()) +
                                                    " elements for storage of " + std::to_string(storage.numel()));
    storage.copy_from(initial_->values.reshape(storage.shape()));
    shard_ = std::make_unique<param_shard>(std::move(storage), optimizer_,
                                           kernels::optimizer_state{std::move(initial_->slots), initial_->steps});
    tables_through_ = initial_->steps;  // a piece exported whole: every step's tables are in
    initial_.reset();
    return {};
  }
  return shard_->rebind(std::move(storage));
}

status parameter_piece::submit(std::int64_t generation, std::int64_t step, piece_gradient grad) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (generation != generation_)
    return make_error(errc::invalid_argument, "parameters: gradient from generation " + std::to_string(generation) +
                                                  ", now " + std::to_string(generation_) + " (ignored)");
  pending_ = std::move(grad);
  pending_step_ = step;
  return {};
}

status parameter_piece::apply_locked(std::int64_t committed, bool drain) {
  if (pending_step_ >= 0 && pending_step_ <= committed) {
    if (!shard_) return make_error(errc::invalid_argument, "parameters: a gradient but no attached piece");
    const bool tables = !pending_.tables.empty();
    if (tables && pending_.delay > 0) {
      // async: the dense part now, the tables' entries (copied: the worker reuses its buffer) later
      piece_gradient later;
      later.entries = pending_.entries.clone();
      later.blocks = pending_.blocks;
      later.block_size = pending_.block_size;
      later.tables = pending_.tables;
      delay_ = pending_.delay;
      delayed_.emplace_back(pending_step_, std::move(later));
      pending_.blocks = 0;
      pending_.entries = tensor{};
    }
    auto updated = shard_->update(pending_);
    if (tables && pending_.delay == 0) tables_through_ = pending_step_ + 1;
    pending_ = piece_gradient{};
    pending_step_ = -1;
    if (!updated) return updated.error();
  }
  while (!delayed_.empty() && (drain || delayed_.front().first <= committed - delay_)) {
    if (auto st = shard_->update_tables(delayed_.front().second); !st) return st;
    tables_through_ = delayed_.front().first + 1;
    delayed_.pop_front();
  }
  return {};
}

std::int64_t parameter_piece::tables_through() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tables_through_;
}

status parameter_piece::apply_committed(std::int64_t committed) {
  std::lock_guard<std::mutex> lock(mutex_);
  return apply_locked(committed);
}

status parameter_piece::rollback(std::int64_t new_generation, std::int64_t committed) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto st = apply_locked(committed);  // the delayed table entries of committed steps stay queued
  pending_ = piece_gradient{};        // an uncommitted step's gradient
  pending_step_ = -1;
  generation_ = new_generation;
  return st;
}

result<tensor> parameter_piece::fetch(std::int64_t committed) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto st = apply_locked(committed, true); !st) return st.error();
  if (!shard_ && initial_) return initial_->values;  // spawned with a state its worker has not taken yet
  if (!shard_) return make_error(errc::invalid_argument, "parameters: nothing attached");
  return shard_->params();
}

result<piece_state> parameter_piece::export_state(std::int64_t committed) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto st = apply_locked(committed, true); !st) return st.error();
  if (!shard_ && !initial_) return make_error(errc::invalid_argument, "parameters: nothing attached");
  auto out = copy_locked();
  if (shard_) shard_->restore_agreed_rows(out.values, out.slots, committed);  // geo: as the replicas last agreed
  return out;
}

piece_state parameter_piece::copy_locked() const {
  piece_state out;
  if (!shard_) {  // spawned with a state (a transition's or a recovery's) its worker has not attached yet
    out.values = initial_->values.clone();
    for (const auto& slot : initial_->slots) out.slots.push_back(slot.clone());
    out.steps = initial_->steps;
    return out;
  }
  out.values = shard_->params().clone();
  for (const auto& slot : shard_->optimizer_state().slots) out.slots.push_back(slot.clone());
  out.steps = shard_->steps();
  return out;
}

void parameter_piece::seed(piece_state state) {
  std::lock_guard<std::mutex> lock(mutex_);
  tables_through_ = state.steps;
  shard_ = std::make_unique<param_shard>(std::move(state.values), optimizer_,
                                         kernels::optimizer_state{std::move(state.slots), state.steps});
  initial_.reset();
  pending_ = piece_gradient{};
  pending_step_ = -1;
  delayed_.clear();
}

bool parameter_piece::holds_values() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shard_ != nullptr || initial_.has_value();
}

std::int64_t parameter_piece::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shard_ ? shard_->params().numel() : initial_ ? initial_->values.numel() : 0;
}

result<piece_state> parameter_piece::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!shard_ && !initial_) return make_error(errc::invalid_argument, "parameters: nothing attached");
  if (!delayed_.empty())
    return make_error(errc::invalid_argument, "parameters: table entries still wait (async mode): no copy");
  return copy_locked();
}

std::int64_t parameter_piece::updates() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shard_ ? shard_->steps() : initial_ ? initial_->steps : 0;
}

status parameter_piece::with_local_rows(const std::vector<sparse_table_grad>& tables,
                                        const std::function<void(local_rows&, const std::vector<table_span>&)>& f) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!shard_) return make_error(errc::invalid_argument, "parameters: nothing attached");
  std::vector<table_span> spans;
  for (const auto& t : tables) {
    auto span = shard_->span_of(t);
    if (!span) return span.error();
    spans.push_back(*span);
  }
  f(shard_->local(tables), spans);
  return {};
}

param_actor_hdl::behavior_type param_actor(param_actor_hdl::stateful_pointer<param_state> self,
                                           optimizer_config optimizer, std::optional<piece_state> initial,
                                           std::int64_t generation) {
  self->state.piece = std::make_shared<parameter_piece>(optimizer, std::move(initial), generation);
  return {
      [=](attach_atom, tensor& storage) -> caf::result<piece_ptr> {
        if (auto st = self->state.piece->attach(std::move(storage)); !st) return to_caf(st.error());
        return self->state.piece;
      },
      [=](update_atom, std::int64_t gen, std::int64_t step, piece_gradient& grad) -> caf::result<ok_atom> {
        if (auto st = self->state.piece->submit(gen, step, std::move(grad)); !st) return to_caf(st.error());
        return ok_atom::value;
      },
      [=](rollback_atom, std::int64_t new_generation, std::int64_t committed) -> caf::result<ok_atom> {
        if (auto st = self->state.piece->rollback(new_generation, committed); !st) return to_caf(st.error());
        return ok_atom::value;
      },
      [=](export_atom, std::int64_t committed) -> caf::result<piece_state> {
        auto t = self->state.piece->export_state(committed);
        if (!t) return to_caf(t.error());
        return std::move(*t);
      },
      [=](fetch_atom, std::int64_t committed) -> caf::result<tensor> {
        auto t = self->state.piece->fetch(committed);
        if (!t) return to_caf(t.error());
        return std::move(*t);
      },
  };
}

}  // namespace cohort::actors
