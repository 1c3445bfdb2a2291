// The serial executor: runs a graph's nodes in order with the kernels of a dispatch table.
// At creation it plans every buffer: each value's last use is computed, and a value's
// buffer is reused by later values once it is dead (best fit by size); reshape outputs
// alias their input. All memory is allocated then, so run() allocates nothing.
//
//   graph g;
//   var loss = tiny_mlp(g, /*rows=*/64);
//   parameter_store params = init_parameters(g, /*seed=*/0);
//   dispatch_table table = cpu_kernels();
//   thread_pool pool(2);
//   auto ex = executor::create(g, params, /*keep=*/{loss.id}, {.kernels = &table, .pool = &pool});
//   if (!ex) return ex.error();
//   auto batch = tiny_batch(0);
//   ex->input(g.find("x")).copy_from(batch["x"]);    // fill inputs in place
//   ex->input(g.find("y")).copy_from(batch["y"]);
//   if (auto st = ex->run(); !st) return st;          // allocates nothing
//   float l = ex->value(loss.id).data<float>()[0];
#pragma once

#include <cstddef>
#include <vector>

#include "graph/graph.hpp"
#include "graph/init.hpp"
#include "kernels/kernel.hpp"

namespace cohort::kernels {

struct executor_options {
  const dispatch_table* kernels = nullptr;
  thread_pool* pool = nullptr;  // null: kernels run on the calling thread only
  void* context = nullptr;      // passed to every kernel (see kernel_call::context)
  /// Values computed straight into caller-owned contiguous tensors instead of the arena
  /// (a worker's parameter gradients into its flat gradient buffer: no copy afterwards).
  /// A value that aliases another (a reshape's output) is not bound; it stays in the arena.
  std::vector<std::pair<value_id, tensor>> bound = {};
};

class executor {
 public:
  /// Plans buffers for all nodes of `g`. Parameters are bound by name to the tensors of
  /// `params` (shared storage: updates to them are seen by the next run). Values in `keep`
  /// stay readable after run(); inputs and parameters always do.
  static result<executor> create(const graph& g, const parameter_store& params, const std::vector<value_id>& keep,
                                 executor_options opts);

  /// The buffer of input `id`, to be filled before run().
  tensor& input(value_id id);
  /// Runs every node. Stops at the first kernel error and returns it, naming the node.
  status run();
  /// Runs nodes [begin, end) only.
  status run(std::size_t begin, std::size_t end);
  /// An input, parameter or kept value (checked: other values may have been overwritten).
  const tensor& value(value_id id) const;
  /// Bytes of activation and gradient memory planned (inputs and parameters excluded).
  std::size_t arena_bytes() const { return arena_bytes_; }
  /// Whether value `id` was computed into its bound tensor (see executor_options::bound).
  bool is_bound(value_id id) const;

 private:
  executor() = default;

  const graph* graph_ = nullptr;
  executor_options opts_;
  std::vector<tensor> values_;  // by value id; planned views into slots
  std::vector<bool> readable_;  // inputs, parameters, kept values
  std::vector<bool> bound_;
  std::vector<std::vector<tensor>> node_in_;  // per node, its operand tensors
  std::vector<std::vector<tensor>> node_out_;
  std::size_t arena_bytes_ = 0;
};

}  // namespace cohort::kernels
