// The state of a worker actor: one (stage, tensor-parallel rank, data-parallel replica) of
// a plan. It owns the stage's local program, one executor per buffer slot (a micro-batch
// in flight keeps its activations in its slot until its backward task), the stage's
// parameters and accumulated gradients in two flat buffers (so a data-parallel reduction
// and a ZeRO shard are each one contiguous range), and the communication context its
// collectives run on. Actors move messages; this struct only computes, so it is tested
// without a scheduler.
//
//   auto cm = compile(tiny_mlp, {.dp = 1}, /*batch=*/64);
//   if (!cm) return cm.error();
//   auto program = cm->program(/*stage=*/0, /*tp_rank=*/0);
//   if (!program) return program.error();
//   kernels::dispatch_table table = kernels::cpu_kernels();
//   add_comm_kernels(table);
//   auto w = stage_worker::create(std::move(*program), /*slots=*/2, &table, nullptr, comm_context{});
//   if (!w) return w.error();
//   if (auto st = (*w)->load_initial_parameters(*cm->serial, /*seed=*/0); !st) return st;
//   auto batch = tiny_batch(/*step=*/0);
//   for (const auto& [name, id] : (*w)->program().data_inputs)
//     (*w)->input(/*slot=*/0, id).copy_from(batch.at(name));   // data inputs and received activations
//   (*w)->zero_grads();
//   if (auto st = (*w)->forward(0); !st) return st;
//   if (auto st = (*w)->backward(0, /*seed=*/1.f); !st) return st;      // 1 / micro_batches (one here)
//   tensor& grads = (*w)->flat_grads();                                   // summed over this step's micro-batches
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "actors/comm_kernels.hpp"
#include "graph/partition.hpp"
#include "kernels/executor.hpp"

namespace cohort::actors {

class stage_worker {
 public:
  /// With `single_micro_batch` (one backward per step) the gradients are computed straight
  /// into flat_grads(); otherwise each backward adds its slot's gradients into it.
  /// With `smaller` (a batch split into shares one row apart: `program` is the larger
  /// shares', `smaller` the others') each slot also gets an executor for the smaller
  /// micro-batches, and use_smaller() picks one; without `larger_used` (a replica whose shares
  /// are all smaller) only those are made, and `program` only sizes the sparse entries.
  static result<std::unique_ptr<stage_worker>> create(stage_program program, int slots,
                                                      const kernels::dispatch_table* table, kernels::thread_pool* pool,
                                                      comm_context comm, bool single_micro_batch = false,
                                                      std::optional<stage_program> smaller = std::nullopt,
                                                      bool larger_used = true);

  /// Fills the parameters with the serial run's initial values (sliced for this tp rank).
  status load_initial_parameters(const graph& serial, std::uint64_t seed);

  const stage_program& program() const { return program_; }
  int slots() const { return static_cast<int>(slot_smaller_.size()); }
  bool has_smaller() const { return !smaller_exec_.empty(); }
  /// Whether the micro-batch `slot` holds from its forward to its backward is a smaller one
  /// (input(), value(), forward() and backward() then use its executor).
  void use_smaller(int slot, bool smaller);
  comm_context& comm() { return *comm_; }

  /// An input of the local program (data input, received value, seed) in `slot`.
  tensor& input(int slot, value_id local);
  /// A kept value (send, loss, parameter gradient) in `slot` after its task ran.
  const tensor& value(int slot, value_id local) const;

  /// Runs the forward part of the local program's chunk `chunk` (one unless the plan has
  /// virtual stages) in `slot`.
  status forward(int slot, int chunk = 0);
  /// Runs the backward part of chunk `chunk` with d(loss)/d(loss) = seed (where the chunk
  /// computes the loss) and adds the gradients of the parameters it completes into flat_grads().
  status backward(int slot, float seed, int chunk = 0);

  /// All local parameters, in program().params order, as one buffer (their tensors are views).
  tensor& flat_params() { return flat_params_; }
  tensor& flat_grads() { return flat_grads_; }
  /// Before a step's first backward (nothing to do when gradients are written in place).
  /// With sparse tables only the dense runs: the tables' ranges of flat_grads() are never
  /// written nor read (their pages are never touched: a table's gradient costs no memory).
  void zero_grads();
  /// Zeroes the sparse tables' ranges of flat_grads() too (once): a sharded plan
  /// reduce-scatters the whole buffer.
  void zero_table_grads();
  /// A buffer of `n` floats kept for this worker's reduce-scattered gradient piece.
  tensor& grad_piece(std::int64_t n);

  /// A sparse table (stage_program::param::sparse()): its gradient is not in flat_grads()
  /// (that range stays zero) but entries, `per_backward` of them per backward task, kept in
  /// sparse_entries() at `first` of this replica's block: `count` rows, then their values.
  struct sparse_table {
    std::size_t param = 0;  // index in program().params
    std::int64_t rows = 0, dim = 0, per_backward = 0;
    std::int64_t smaller_per_backward = 0;  // a smaller micro-batch's (the rest of its room: row -1)
    std::int64_t first = 0, count = 0;
    std::int64_t first_row = 0;  // a row shard's first row (stage_program::param::sparse_first_row)
  };
  const std::vector<sparse_table>& sparse_tables() const { return sparse_; }
  /// Before a step's first backward: `backwards` backward tasks follow, and this replica's
  /// entries go to block `block` of `blocks` (the blocks of every data-parallel replica are
  /// gathered there). Sizes the buffers when the plan's shape changes.
  void begin_sparse_step(int backwards, int blocks, int block);
  tensor& sparse_entries() { return entries_; }
  /// This replica's block of sparse_entries().
  tensor sparse_block() { return entries_.slice(0, block_ * block_size_, (block_ + 1) * block_size_); }
  std::int64_t sparse_block_size() const { return block_size_; }
  /// The runs of flat_grads() that are dense gradients (everything but the sparse tables).
  const std::vector<range>& dense_runs() const { return dense_runs_; }
  /// [offset, size) of parameter i inside the flat buffers.
  range param_range(std::size_t i) const { return ranges_[i]; }

 private:
  stage_worker() = default;

  kernels::executor& exec(int slot);
  const kernels::executor& exec(int slot) const;

  stage_program program_;
  std::optional<stage_program> smaller_;  // its executors point at its graph
  std::unique_ptr<comm_context> comm_;    // stable address: executors point at it
  tensor flat_params_, flat_grads_, grad_piece_;
  std::vector<range> ranges_;
  std::vector<std::vector<std::size_t>> chunk_params_;  // by chunk: the params its backward completes
  bool grads_in_place_ = false;
  parameter_store views_;  // name -> view into flat_params_
  std::vector<sparse_table> sparse_;
  std::vector<range> dense_runs_;
  tensor entries_;
  std::int64_t block_size_ = 0, blocks_ = 0, block_ = 0, backwards_ = 0, backward_index_ = 0;
  bool table_grads_zeroed_ = false;
  std::vector<std::unique_ptr<kernels::executor>> exec_, smaller_exec_;
  std::vector<char> slot_smaller_;
};

}  // namespace cohort::actors
