// The cost model: pure functions with units in their names. Compute time comes from FLOPs at
// the device's peak times an efficiency and bytes at its memory bandwidth times an efficiency
// (for matrix multiplies the larger of the two — or their sum on CPUs, whose BLAS packs the
// operands before multiplying; the bytes alone for everything else), plus a fixed cost per
// operation; communication is the
// alpha-beta model of each collective's algorithm on the link it runs over. The
// efficiencies are not constants baked in: for this machine they start at defaults, are
// fitted to measured task times (refit) and saved with the machine's profile; for the
// devices of a cluster file they come from the device's profile (planner/device_profile.hpp),
// whose GEMM efficiency depends on the GEMM's shape (small and skinny GEMMs run far below peak).
//
//   graph g;
//   var loss = tiny_mlp(g, /*rows=*/64);
//   op_profile p = profile_of(g, g.nodes()[0], /*rows=*/64);      // per batch row
//   device_speed device{.flops_per_s = 50e9, .memory_bytes_per_s = 20e9};
//   efficiency eff;                                                // the defaults, until refit
//   double s = compute_seconds(p.scaled(/*rows=*/256), device, eff);
//   eff.gemm_by_flops = {{1e9, 0.2}, {1e11, 0.8}};                 // a device profile's table
//   assert(std::abs(eff.gemm_at(/*flops=*/1e10) - 0.5) < 1e-12);   // log-linear between points
//   double c = allreduce_seconds(/*bytes=*/4e6, /*ranks=*/8, {50e9, 5e-6}, eff);
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "planner/cluster.hpp"  // link_cost

namespace cohort::planner {

/// What an operation costs, for one batch row of its graph.
struct op_profile {
  double flops = 0;        // floating-point operations
  double bytes = 0;        // bytes read and written
  bool gemm = false;       // a matrix multiply (its own efficiency)
  bool attention = false;  // fused attention: GEMMs inside one kernel (efficiency.attention, when given)
  op_profile scaled(double rows) const { return {flops * rows, bytes * rows, gemm, attention}; }
};

/// Fractions of peak actually reached, and the fixed cost of an operation.
struct efficiency {
  double gemm = 0.6;  // of peak FLOP/s, matrix multiplies (of any size, without gemm_by_flops)
  /// GEMM efficiency by size: points (FLOPs of one GEMM call on one device; efficiency), FLOPs
  /// ascending, from a device profile's table; between points log-linear in the FLOPs, beyond
  /// the ends the end's value. Small GEMMs leave most of an accelerator idle (a 1024^3 GEMM
  /// fills 32 of an H100's 132 SMs with 128 x 256 tiles); skinny ones are memory-bound, which
  /// the roofline's bytes term prices. Empty: `gemm` for every size.
  std::vector<std::array<double, 2>> gemm_by_flops = {};
  /// Of peak FLOP/s, fused attention (its GEMMs and softmax in one kernel, as flash attention
  /// runs them); 0: the GEMM efficiency at the op's size.
  double attention = 0;
  double memory = 0.5;           // of peak memory bandwidth, everything else
  double link = 0.8;             // of link bandwidth, communication
  double per_op_seconds = 2e-6;  // launch / dispatch / bookkeeping per operation
  /// The runtime's own costs, measured on this machine (--cluster.calibrate times a tiny
  /// model under a few plans) and rescaled by the online refit; 0 for planned clusters:
  ///   each forward or backward task: fetching its micro-batch or transfer, waking a thread;
  double per_task_seconds = 0;
  ///   each step: the coordinator's round to the workers and back, the commit;
  double per_step_seconds = 0;
  ///   each step, per rank beyond the first (the coordinator's fan-out and fan-in).
  double per_rank_seconds = 0;
  /// The cost model without the runtime's terms (the bare simulation; a cluster's devices).
  efficiency without_runtime_overhead() const {
    efficiency e = *this;
    e.per_task_seconds = e.per_step_seconds = e.per_rank_seconds = 0;
    return e;
  }
  /// Overhead of a step outside its tasks for `ranks` ranks.
  double step_overhead_seconds(int ranks) const {
    return per_step_seconds + per_rank_seconds * (ranks > 1 ? ranks - 1 : 0);
  }
  /// The GEMM efficiency of a GEMM of `flops` FLOPs (`gemm` when there is no table).
  double gemm_at(double flops) const;
};

/// Why `e` cannot be a fraction of a peak: "" when every efficiency (gemm, memory, link, each
/// point of the GEMM table) is in (0, 1] and the table's FLOPs ascend; else the first
/// offender named as a field ("efficiency.gemm is 1.79, above 1"). A fraction above 1 means
/// the peak it is a fraction of was never measured; such a value is refused, never saved.
std::string efficiency_problem(const efficiency& e);

struct device_speed {
  double flops_per_s = 1e11;
  double memory_bytes_per_s = 1e10;
  /// An operation whose bytes fit in the last-level cache streams at the cache's rate
  /// (0: no cache level modelled, as for accelerators whose HBM dominates).
  double cache_bytes = 0;
  double cache_bytes_per_s = 0;
  /// The BLAS packs a GEMM's operands at every call before multiplying (OpenBLAS on CPUs), so
  /// the traffic adds to the arithmetic; false (accelerators): the roofline's larger side.
  bool gemm_packs_operands = false;
  /// A GEMM's operand traffic per second, measured with its arithmetic rate from two shapes
  /// (--cluster.calibrate: a square GEMM and a skinny one): a GEMM then costs
  /// (flops / flops_per_s + bytes / gemm_bytes_per_s) / gemm efficiency. 0: the roofline
  /// (flops_per_s is then the square GEMM's whole rate).
  double gemm_bytes_per_s = 0;
  /// What the optimizer's update streams per second (parameters, gradients, state), measured
  /// on this machine (--cluster.calibrate); 0: priced as memory traffic on the roofline.
  double optimizer_bytes_per_s = 0;
};

/// FLOPs and bytes of node `n` of `g` divided by the batch size `rows` it was built with.
op_profile profile_of(const graph& g, const node& n, std::int64_t rows);

/// Matrix multiplies: FLOPs / (peak x gemm efficiency at the GEMM's size) and bytes / (bandwidth x memory
/// efficiency), added where the device packs operands (the packing does not overlap the
/// arithmetic), else the larger of the two; other operations: the bytes term alone; plus the
/// per-operation cost. The bandwidth is the cache's when the bytes fit in it.
double compute_seconds(const op_profile& p, const device_speed& d, const efficiency& e);

/// The optimizer's update of `bytes` of parameters, gradients and state: at the measured
/// optimizer rate when the device has one (a measured rate, not a peak: no efficiency applies),
/// else as memory traffic (compute_seconds of the bytes alone).
double optimizer_seconds(double bytes, const device_speed& d, const efficiency& e);

/// One message of `bytes` over a link.
double p2p_seconds(double bytes, const link_cost& l, const efficiency& e);
/// Ring allreduce of `bytes` over `ranks`: 2(n-1) steps of bytes/n.
double allreduce_ring_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e);
/// Recursive-doubling allreduce: log2(n) exchanges of the whole buffer.
double allreduce_recursive_doubling_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e);
/// Whether the runtime's allreduce (transport::allreduce_algorithm_for) uses recursive
/// doubling: on power-of-two groups for at most 1 MiB on a pair, 64 KiB on larger groups (planner/ does
/// not link transport/; test/planner/cost_model_test.cpp checks the two rules agree).
bool allreduce_uses_recursive_doubling(double bytes, int ranks);
/// The allreduce the runtime runs: recursive doubling or the ring, by that rule.
double allreduce_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e);
/// Ring reduce-scatter or all-gather of a `bytes` buffer: n-1 steps of bytes/n.
double reduce_scatter_ring_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e);
double all_gather_ring_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e);

/// Communication overlapped as a runtime that overlaps it issues it (Megatron's
/// --overlap-grad-reduce): part k's gradients are reduced once its backward pass is done
/// (`backward_s`, in the order the pass runs them), one reduction after another on the link
/// (`reduce_s`, the same order); what runs past the end of the pass is exposed. The last part
/// the pass reaches (the model's first layers, the embedding) is never hidden.
double exposed_after_backward(const std::vector<double>& backward_s, const std::vector<double>& reduce_s);
/// The same ahead of a forward pass (--overlap-param-gather): part k's parameters are gathered,
/// one gather after another from the pass's start, before part k's forward (`forward_s` in
/// forward order) can run; the time the pass waits for them is exposed. The first part's gather
/// is never hidden.
double exposed_before_forward(const std::vector<double>& forward_s, const std::vector<double>& gather_s);

/// The data-parallel reduction (`reduce_s`) and a sharded plan's all-gather (`gather_s`) of one
/// rank, overlapped: each node's share by its gradient `bytes`, the node times (forward order)
/// scaled to the rank's timed passes; the exposed seconds of both. No bytes: all of it exposed.
double exposed_dp_seconds(std::vector<double> forward_s, std::vector<double> backward_s,
                          const std::vector<double>& bytes, double forward_total_s, double backward_total_s,
                          double reduce_s, double gather_s);

/// The idle fraction of a synchronous pipeline: (p - 1) / (m + p - 1).
double bubble_fraction(int stages, int micro_batches);

}  // namespace cohort::planner
