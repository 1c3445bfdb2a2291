// Parameter pieces and their optimizer state.
#include "actors/param_shard.hpp"

#include <string>

namespace cohort::actors {

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

status param_shard::rebind(tensor storage) {
  if (storage.numel() != piece_.numel())
    return make_error(errc::invalid_argument, "parameter rebind: storage of " + std::to_string(storage.numel()) +
                                                  " elements for a piece of " + std::to_string(piece_.numel()));
  if (!storage.shares_storage_with(piece_) || storage.offset() != piece_.offset()) storage.copy_from(piece_);
  piece_ = std::move(storage);
  return {};
}

}  // namespace cohort::actors
