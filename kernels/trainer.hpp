// Serial training: a graph with its loss, differentiated, planned and run step after step
// with an optimizer. This is the reference every distributed plan is compared against.
//
//   graph g;
//   var loss = tiny_mlp(g, /*rows=*/64);
//   auto tr = serial_trainer::create(g, loss, {.optimizer = sgd_config{.lr = 0.05f}, .seed = 1});
//   if (!tr) return tr.error();
//   auto batch = tiny_batch(/*step=*/0);
//   (*tr)->input("x").copy_from(batch["x"]);  (*tr)->input("y").copy_from(batch["y"]);
//   result<float> l = (*tr)->step();        // forward, backward, update; the loss before the update
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/autodiff.hpp"
#include "graph/init.hpp"
#include "graph/optimizer.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/executor.hpp"
#include "kernels/optimizer.hpp"
#include "kernels/thread_pool.hpp"

namespace cohort::kernels {

struct trainer_options {
  optimizer_config optimizer = sgd_config{};
  std::uint64_t seed = 0;          // parameter initialization
  int threads = 1;                 // OpenBLAS + kernel pool
  bool reference_kernels = false;  // the plain-loop oracle instead of the fast kernels
  /// Tables read by one embedding_bag are updated from their touched rows (autodiff's
  /// sparse_tables): bit for bit the dense update, for an optimizer that allows it
  /// (sparse_update_problem); otherwise create() fails saying why.
  bool sparse_tables = false;
  /// With sparse_tables and the fast kernels: the fused lookup-and-update path — a table's
  /// touched rows are summed straight from its bag's output gradient and ids and updated (no
  /// gradient entries written or read; autodiff's fused_tables), bit for bit the entries'
  /// path. false: the entries, as the actor runtime sends them.
  bool fused_tables = true;
};

class serial_trainer {
 public:
  /// Differentiates `loss`, initializes parameters from the seed, plans the executor.
  /// `g` must outlive the trainer.
  static result<std::unique_ptr<serial_trainer>> create(graph& g, var loss, trainer_options opts);

  /// The buffer of the input called `name` (throws std::invalid_argument if none).
  tensor& input(const std::string& name);
  /// Forward, backward and one optimizer update; returns the loss before the update.
  result<float> step();

  parameter_store& parameters() { return params_; }
  const gradients& grads() const { return grads_; }
  const executor& exec() const { return *exec_; }
  const dispatch_table& kernels() const { return table_; }
  thread_pool& pool() { return *pool_; }
  std::int64_t steps_done() const { return steps_; }

 private:
  serial_trainer(graph& g, trainer_options opts);

  graph* g_;
  trainer_options opts_;
  dispatch_table table_;
  std::unique_ptr<thread_pool> pool_;
  gradients grads_;
  parameter_store params_;
  std::unique_ptr<executor> exec_;
  std::vector<tensor*> param_tensors_;  // aligned with grads_.param_grads
  std::vector<optimizer_state> opt_state_;
  struct sparse_table {
    tensor* table;
    value_id rows, values;      // the entries (no_value when fused)
    value_id output_grad, ids;  // the bag's, when fused
    bool mean;
    row_sums sums;
    optimizer_state state;
  };
  std::vector<sparse_table> sparse_;  // aligned with grads_.sparse_grads
  std::int64_t steps_ = 0;
};

}  // namespace cohort::kernels
