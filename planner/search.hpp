// The planner: every dp x tp x pp x micro-batches x schedule x sharding for the devices at
// hand, each cut into pipeline stages by dynamic programming over the model's layer
// boundaries, each step played by the simulator on cost-model durations, each checked
// against device memory; ranked by predicted step time and explained.
//
// Ranks are placed by topology: tensor-parallel groups are consecutive devices (inside a
// machine unless o.tp_across_machines), then pipeline stages, then data-parallel replicas;
// so tp traffic takes the fastest links and dp traffic the slowest.
//
//   auto a = analyze_model(tiny_mlp, /*optimizer_slots=*/2);
//   if (!a) return a.error();
//   auto topo = topology_of(local_cluster(/*cores=*/4, /*memory=*/16e9, 50e9, 20e9));   // or a cluster file's
//   if (!topo) return topo.error();
//   search_options o{.batch = 64, .topo = *topo, .eff = machine_profile{}.eff};
//   auto ranked = rank_plans(**a, o);          // fitting plans first, fastest first
//   if (!ranked) return ranked.error();
//   std::cout << explain(*ranked, 10);          // plan, step time, memory, bubble, comm
//   if (ranked->empty() || !ranked->front().fits) std::cout << what_would_fit(**a, o);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/analysis.hpp"
#include "planner/cluster.hpp"
#include "planner/plan.hpp"
#include "planner/topology.hpp"

namespace cohort::planner {

/// What one stage's ranks are predicted to spend per step, in the runtime's task kinds, as the
/// runtime measures them: from a task's start to its end, waits for inputs left out, slowed
/// where ranks share cores.
struct stage_prediction {
  double forward_s = 0, backward_s = 0;  // all micro-batches, tensor-parallel collectives included
  double compute_comm_s = 0;             // of which tensor-parallel collectives (unshared cores)
  double update_s = 0;                   // the amplifier: gradient reduction over dp + optimizer
  double update_comm_s = 0;              // of which the gradient reduction
};

struct planned {
  parallel_plan plan;
  std::vector<stage_prediction> stages;
  std::vector<std::size_t> cuts;   // forward nodes where stages 1.. begin
  bool recompute = false;          // activations recomputed in the backward pass (planning only)
  bool embedding_on_host = false;  // the first layer runs on the host CPUs (planning only)
  double step_s = 0;               // predicted
  double peak_memory_bytes = 0;    // the fullest rank
  double bubble = 0;               // idle fraction of the pipeline
  double comm_s = 0;               // communication on the step's critical path (estimate)
  bool fits = true;
  std::string rejected;  // why it does not run, when !fits
};

struct search_options {
  std::int64_t batch = 1;
  topology topo;
  efficiency eff;
  int max_micro_batches = 64;
  bool consider_gpipe = true;
  bool tp_across_machines = false;
  double memory_margin = 0.9;  // use at most this fraction of device memory
  /// Activations and messages in 2-byte types (mixed precision); parameters, gradients and
  /// optimizer state still count 4 bytes each (master weights).
  bool half_precision = false;
  /// Also consider recomputing activations in the backward pass (keep only each layer's
  /// input; the backward pass runs the forward again). The runtime does not implement it
  /// yet: only for planning clusters (simulated), never for plans this machine runs.
  bool allow_recompute = false;
  /// Plan for a runtime that overlaps communication with compute (planning published runs
  /// only; cohort's runtime overlaps neither): tensor-parallel collectives run beside the
  /// stage's compute (a stage's micro-batch takes the longer of the two, as Megatron's
  /// --tp-comm-overlap); the data-parallel reduction runs beside the last micro-batch's
  /// backward pass and a sharded plan's all-gather beside the first one's forward pass
  /// (--overlap-grad-reduce, --overlap-param-gather).
  bool overlap_tp_comm = false;
  bool overlap_dp_reduction = false;
  /// Plan for a runtime with sequence parallelism (planning published runs only; Megatron's
  /// --sequence-parallel, which its --tp-comm-overlap requires): the work a tensor-parallel
  /// group would repeat on every rank (layer norms, residual adds, dropout, the loss) is split
  /// over the group by sequence, and so are the activations it keeps. The forward pass's
  /// collectives move what its allreduces moved (a reduce-scatter and an all-gather each); the
  /// backward pass's half again (each column-split GEMM's input is gathered again for its
  /// weight gradient).
  bool sequence_parallel = false;
  /// Plan for a runtime that accumulates and reduces gradients in f32 under mixed precision
  /// (planning published runs only; Megatron does for bf16 unless --grad-reduce-in-bf16): the
  /// data-parallel reduction moves, and the gradient buffer holds, 4 bytes per parameter.
  bool f32_gradients = false;
  /// Plan for a runtime that computes the loss in f32 as separate passes over each rank's share
  /// of the vocabulary (planning published runs only; Megatron's vocab-parallel cross-entropy
  /// unless --fp16-lm-cross-entropy or --cross-entropy-loss-fusion): f32_loss_bytes_per_logit
  /// moved per logit, and the f32 softmax kept for the backward pass instead of the logits.
  bool f32_loss = false;
  /// Plan for a runtime that gives every pipeline stage the same number of layers
  /// (model_analysis::layer_starts), the operations before the first layer with the first stage
  /// and those after the last with the last (planning published runs only; Megatron's default
  /// split, megatron/core/transformer/transformer_block.py get_num_layers_to_build: the layers
  /// over pp, then over the virtual stages). Plans whose stages do not divide the layers are
  /// no candidates; evaluating one is an error that says so.
  bool even_layers = false;
  /// Chunks per pipeline rank to consider (interleaved 1F1B where > 1: 1F1B plans whose
  /// micro-batches come in whole groups of pp, at most one stage per layer).
  std::vector<int> virtual_stages = {1, 2, 4};
  /// The heterogeneous pipeline (--exec.mode=hetero): every embedding lookup in the first
  /// pipeline stage (its cut at or after model_analysis::lookups_end), the dense layers
  /// balanced around them.
  bool lookups_first = false;
};

/// Bytes the f32 loss (search_options::f32_loss) moves per logit: forward (`backward` false)
/// the conversion to f32 under mixed precision (2 read, 4 written), the row maxima (4), the
/// shift in place (8), exp in place (8), the row sums (4) and the division that keeps the
/// softmax (8); backward the softmax scaled in place (8) and converted back (4 read, 2 written).
double f32_loss_bytes_per_logit(bool backward, bool half_precision);

/// Predicts one plan (stage cuts chosen here unless `cuts` is given). `embedding_on_host`
/// runs the forward operations before the first layer boundary (and their backward) on
/// o.topo.host as an extra pipeline stage in front of the accelerators.
result<planned> evaluate_plan(const model_analysis& a, const parallel_plan& p, const search_options& o,
                              const std::vector<std::size_t>& cuts = {}, bool recompute = false,
                              bool embedding_on_host = false);

/// The planner's stage cuts for `p` (forward nodes where stages 1.. begin; empty for pp = 1),
/// as evaluate_plan chooses them: the only stage cutter in the code.
result<std::vector<std::size_t>> stage_cuts(const model_analysis& a, const parallel_plan& p, const search_options& o);
/// The cuts of search_options::even_layers: `stages` stages of equally many layers, or an error
/// naming the layers and the stages when they do not divide.
result<std::vector<std::size_t>> even_layer_cuts(const model_analysis& a, int stages);
/// The heterogeneous pipeline's constraint on given cuts (search_options::lookups_first), or
/// an error naming the first forward node a cut may be at.
status lookups_in_first_stage(const model_analysis& a, const std::vector<std::size_t>& cuts);

/// Every candidate on o.topo.devices devices: fitting ones by step time, then the rejected
/// by memory. Empty when no candidate exists at all (e.g. a batch smaller than every dp the devices allow). With
/// o.topo.host, every candidate is also tried with the embedding on the host CPUs.
/// The fastest fitting plan is first, except where a near tie is broken (see
/// prefer_simpler_near_ties).
result<std::vector<planned>> rank_plans(const model_analysis& a, const search_options& o);

/// Predictions closer than this fraction are a tie: the cost model's error between two twins
/// of one layout (measured: a few per cent at best) is larger than the difference.
inline constexpr double near_tie_fraction = 0.01;

/// Breaks near ties among the fitting plans of `ranked` (sorted by step time) towards the one
/// with the fewest synchronisations: unsharded before sharded (a sharded plan waits for the
/// all-gather of its parameters at every step's start), then fewer micro-batches, then 1F1B
/// before GPipe, then fewer virtual stages. That plan moves to the front; the others keep their order. Returns the
/// position the fastest plan now has (0 when it stays first).
std::size_t prefer_simpler_near_ties(std::vector<planned>& ranked, double within = near_tie_fraction);

/// When nothing fits: what would — the fewest devices of the same kind that fit (up to 64x),
/// whether sharding or more micro-batches would, the memory one device would need.
std::string what_would_fit(const model_analysis& a, const search_options& o);

/// A table of the first `rows` plans: plan, predicted step time, peak memory, bubble %, comm %.
std::string explain(const std::vector<planned>& ranked, std::size_t rows);

/// "dp2 tp2 pp2 m4 1f1b sharded"
std::string describe(const parallel_plan& p);
/// describe(plan), " recompute" when it recomputes, " embedding-on-host" when it moves the first layer.
std::string describe(const planned& p);

/// FLOPs of one training step's forward and backward passes at `batch` rows.
double model_flops(const model_analysis& a, std::int64_t batch);

}  // namespace cohort::planner
