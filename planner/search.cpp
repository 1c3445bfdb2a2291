// Plan evaluation (costs, stage cuts, simulation, memory) and the search over plans.
#include "planner/search.hpp"

#include "planner/batch_split.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "planner/simulator.hpp"

namespace cohort::planner {
namespace {

// A linear function of the rows of a micro-batch.
struct per_rows {
  double fixed = 0, per_row = 0;
  double at(double rows) const { return fixed + per_row * rows; }
  per_rows& operator+=(const per_rows& o) {
    fixed += o.fixed, per_row += o.per_row;
    return *this;
  }
};

// What the model looks like under one tensor-parallel degree, computed once per degree.
struct tp_view {
  const axis_completion* completion = nullptr;
  std::vector<bool> split;                 // every node: its computation is divided over tp
  std::vector<per_rows> comm_bytes;        // every node: allreduce-equivalent bytes over the tp group
  std::vector<per_rows> activation_bytes;  // forward node: outputs one rank keeps per micro-batch
  std::vector<double> param_bytes;         // forward node: parameters one rank holds, read first here
  // forward node: of those, sparse tables (their gradient is entries), and the entries one
  // rank makes per micro-batch (rows and values; the runtime gathers them over dp)
  std::vector<double> sparse_param_bytes;
  std::vector<per_rows> sparse_entry_bytes;
  std::vector<per_rows> sparse_value_bytes;  // of which their values (a touched row's bytes each)
};

result<tp_view> view_for(const model_analysis& a, int tp, bool sequence_parallel) {
  auto comp = a.completion(tp);
  if (!comp) return comp.error();
  const axis_completion& c = **comp;
  const graph& g = *a.g;
  tp_view out;
  out.completion = &c;
  const std::size_t n = g.nodes().size(), forward = a.forward_nodes();
  out.split.assign(n, false);
  out.comm_bytes.assign(n, {});
  // the runtime converts a value to a placement once and reuses it for every consumer
  // (graph/partition.cpp): charged once, at the first
  std::set<std::pair<value_id, std::string>> converted;
  for (std::size_t i = 0; i < n; ++i) {
    const node& nd = g.nodes()[i];
    for (std::size_t j = 0; j < nd.inputs.size(); ++j) {
      const placement& have = c.placement_of(nd.inputs[j]);
      const placement& need = c.required[i][j];
      if (as_shard(need) != nullptr) out.split[i] = true;
      if (have == need || (is_replicate(have) && as_shard(need) != nullptr)) continue;  // a local slice is free
      if (!converted.emplace(nd.inputs[j], to_string(need)).second) continue;
      // all-gather and reduce-scatter move half what an allreduce moves
      double weight = is_partial(have) && is_replicate(need) ? 1.0 : 0.5;
      // sequence parallelism: a backward allreduce (a column-split GEMM's input gradient)
      // becomes a reduce-scatter and an all-gather, and the GEMM's weight gradient gathers
      // the input it kept split by sequence again: half an allreduce more (Megatron's linear
      // layers re-gather in the backward pass; the forward pass moves what it moved)
      if (sequence_parallel && tp > 1 && i >= forward && weight == 1.0) weight = 1.5;
      auto v = static_cast<std::size_t>(nd.inputs[j]);
      out.comm_bytes[i] += {weight * a.value_bytes_fixed[v], weight * a.value_bytes_per_row[v]};
    }
  }
  // gradients placed unlike their parameters are fixed up at the end of the backward pass
  for (auto [p, d] : a.grads.param_grads)
    if (!(c.placement_of(p) == c.placement_of(d))) {
      auto producer = static_cast<std::size_t>(g.value(d).producer);
      auto v = static_cast<std::size_t>(d);
      out.comm_bytes[producer] += {a.value_bytes_fixed[v], a.value_bytes_per_row[v]};
    }
  out.activation_bytes.assign(forward, {});
  out.param_bytes.assign(forward, 0.0);
  out.sparse_param_bytes.assign(forward, 0.0);
  out.sparse_entry_bytes.assign(forward, {});
  out.sparse_value_bytes.assign(forward, {});
  std::vector<bool> counted(g.num_values(), false);
  for (std::size_t i = 0; i < forward; ++i) {
    for (auto v : g.nodes()[i].outputs) {
      double share = as_shard(c.placement_of(v)) != nullptr ? 1.0 / tp : 1.0;
      // sequence parallelism keeps a whole value's rows split over the group
      const double row_share = sequence_parallel ? 1.0 / tp : share;
      auto k = static_cast<std::size_t>(v);
      out.activation_bytes[i] += {a.value_bytes_fixed[k] * share, a.value_bytes_per_row[k] * row_share};
    }
    for (auto v : g.nodes()[i].inputs)
      if (g.value(v).kind == value_kind::parameter && !counted[static_cast<std::size_t>(v)]) {
        counted[static_cast<std::size_t>(v)] = true;  // a parameter lives on the stage that reads it first
        double share = as_shard(c.placement_of(v)) != nullptr ? 1.0 / tp : 1.0;
        out.param_bytes[i] += static_cast<double>(g.value(v).type.shape.numel()) * 4.0 * share;
        for (const auto& sg : a.grads.sparse_grads)
          if (sg.param == v) {
            out.sparse_param_bytes[i] += static_cast<double>(g.value(v).type.shape.numel()) * 4.0 * share;
            // the values split like the table's columns; a row shard's entries stay whole
            const shard* s = as_shard(c.placement_of(v));
            const double values_share = s != nullptr && s->dim == 1 ? 1.0 / tp : 1.0;
            const auto r = static_cast<std::size_t>(sg.rows), x = static_cast<std::size_t>(sg.values);
            out.sparse_entry_bytes[i] += {a.value_bytes_fixed[r] + a.value_bytes_fixed[x] * values_share,
                                          a.value_bytes_per_row[r] + a.value_bytes_per_row[x] * values_share};
            out.sparse_value_bytes[i] +=
                {a.value_bytes_fixed[x] * values_share, a.value_bytes_per_row[x] * values_share};
          }
      }
  }
  return out;
}

// The loss node of the f32 loss (search_options::f32_loss) and the logits it reads, or nullopt.
std::optional<value_id> f32_loss_logits(const search_options& o, const node& n) {
  if (!o.f32_loss) return std::nullopt;
  if (n.kind == op_kind::softmax_cross_entropy) return n.inputs[0];
  if (n.kind == op_kind::softmax_cross_entropy_grad) return n.inputs[1];
  return std::nullopt;
}

link_cost link_for(const search_options& o, int span) {
  return span <= o.topo.devices_per_machine ? o.topo.intra : o.topo.inter;
}

// Caches shared by the plans of one search: the per-degree views and the stage cuts,
// which depend on (tp, pp, micro-batch rows) only.
struct search_cache {
  std::map<int, tp_view> views;
  std::map<std::tuple<int, int, std::int64_t>, std::vector<std::size_t>> cuts;
};

// Least loaded busiest stage, by dynamic programming over the candidate cut positions.
// No cut before `first_cut` (the heterogeneous pipeline's lookups stay in the first stage).
result<std::vector<std::size_t>> balanced_cuts(const model_analysis& a, int pp, const std::vector<double>& node_s,
                                               double rows, double byte_scale, const link_cost& link,
                                               const efficiency& eff, std::size_t first_cut) {
  const std::size_t forward = a.forward_nodes();
  std::vector<std::size_t> candidates = a.boundaries;
  if (candidates.size() + 1 < static_cast<std::size_t>(pp) || forward < 200) {
    candidates.clear();
    for (std::size_t i = 1; i < forward; ++i) candidates.push_back(i);
  }
  std::erase_if(candidates, [&](std::size_t c) { return c < first_cut; });
  if (candidates.size() + 1 < static_cast<std::size_t>(pp))
    return make_error(errc::invalid_argument, "cannot cut " + std::to_string(forward) + " forward operations into " +
                                                  std::to_string(pp) + " pipeline stages");
  std::vector<std::size_t> pos;
  pos.reserve(candidates.size() + 2);
  pos.push_back(0);
  pos.insert(pos.end(), candidates.begin(), candidates.end());
  pos.push_back(forward);
  std::vector<double> prefix(forward + 1, 0.0);
  for (std::size_t i = 0; i < forward; ++i) prefix[i + 1] = prefix[i] + node_s[i];
  const std::size_t k = pos.size();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> cross(k, 0.0);
  for (std::size_t c = 1; c + 1 < k; ++c) cross[c] = 2 * p2p_seconds(a.cut_bytes(pos[c], rows) * byte_scale, link, eff);
  const auto stages = static_cast<std::size_t>(pp);
  // best[s * k + j]: the busiest of s stages covering pos[0] .. pos[j]; from: where stage s starts
  std::vector<double> best((stages + 1) * k, inf);
  std::vector<std::size_t> from((stages + 1) * k, 0);
  best[0] = 0;
  for (std::size_t s = 1; s <= stages; ++s)
    for (std::size_t j = s; j < k; ++j) {
      if (s == stages && j != k - 1) continue;
      for (std::size_t i = s - 1; i < j; ++i) {
        if (best[(s - 1) * k + i] == inf) continue;
        double v =
            std::max(best[(s - 1) * k + i], prefix[pos[j]] - prefix[pos[i]] + cross[i] + (j + 1 < k ? cross[j] : 0));
        if (v < best[s * k + j]) best[s * k + j] = v, from[s * k + j] = i;
      }
    }
  std::vector<std::size_t> cuts;
  std::size_t j = k - 1;
  for (std::size_t s = stages; s > 1; --s) {
    j = from[s * k + j];
    cuts.push_back(pos[j]);
  }
  std::reverse(cuts.begin(), cuts.end());
  return cuts;
}

result<planned> evaluate(const model_analysis& a, const parallel_plan& p, const search_options& o,
                         const std::vector<std::size_t>& given_cuts, bool recompute, bool on_host,
                         search_cache& cache) {
  planned out;
  out.plan = p;
  out.recompute = recompute;
  out.embedding_on_host = on_host;
  if (on_host && (!o.topo.host || a.boundaries.empty()))
    return make_error(errc::invalid_argument, "no host CPUs or no first layer to put on them");
  if (on_host && p.virtual_stages > 1)
    return make_error(errc::unsupported, "the embedding on the host is not modelled with virtual stages");
  if (on_host && o.even_layers)  // Megatron's split keeps the embedding in the first stage
    return make_error(errc::unsupported, "the embedding on the host is not Megatron's even split");
  // forward nodes [0, head) run on the host
  const std::size_t head = on_host ? a.boundaries.front() : 0;
  if (auto st = validate(p, o.batch); !st) return st.error();
  std::vector<std::size_t> cuts = given_cuts;
  if (cuts.empty() && p.stages() > 1 && o.even_layers) {  // before the costs: most plans fail here
    auto even = even_layer_cuts(a, p.stages());
    if (!even) return even.error();
    cuts = std::move(*even);
  }
  auto it = cache.views.find(p.tp);
  if (it == cache.views.end()) {
    auto v = view_for(a, p.tp, o.sequence_parallel);
    if (!v) return v.error();
    it = cache.views.emplace(p.tp, std::move(*v)).first;
  }
  const tp_view& view = it->second;
  const graph& g = *a.g;
  // the largest share: the replica and the micro-batch the step waits for (batch_split)
  const std::int64_t rows_int = batch_split{o.batch, p.dp, p.micro_batches}.largest();
  const double rows = static_cast<double>(rows_int);
  const std::size_t forward = a.forward_nodes();
  const double bytes_scale = o.half_precision ? 0.5 : 1.0;  // activations and messages
  const link_cost tp_link = link_for(o, p.tp), pp_link = link_for(o, p.tp * p.pp), dp_link = link_for(o, p.ranks());

  // Time per micro-batch charged to each forward node (its own and its backward nodes').
  std::vector<double> fwd_s(forward, 0.0), bwd_s(forward, 0.0), comm_s(forward, 0.0), fwd_comm_s(forward, 0.0);
  stage_timing host_stage;
  double host_params = 0;
  for (std::size_t i = 0; i < g.nodes().size(); ++i) {
    op_profile cost = a.node_cost[i].at(rows);
    cost.bytes *= bytes_scale;
    auto owner = static_cast<std::size_t>(a.owner[i]);
    if (owner < head) {  // on the host: whole (no tensor parallelism), replicas sharing its CPUs
      const double sharing = std::max(1.0, static_cast<double>(p.dp) / o.topo.host->devices);
      double seconds = compute_seconds(cost, o.topo.host->speed, o.topo.host->eff) * sharing;
      (i < forward ? host_stage.forward_s : host_stage.backward_s) += seconds;
      continue;
    }
    // sequence parallelism divides what the group would otherwise repeat too
    if (view.split[i] || o.sequence_parallel) cost = {cost.flops / p.tp, cost.bytes / p.tp, cost.gemm, cost.attention};
    if (auto logits = f32_loss_logits(o, g.nodes()[i]))  // passes over the rank's vocabulary share
      cost.bytes = a.value_bytes(*logits, rows) / 4.0 / p.tp * f32_loss_bytes_per_logit(i >= forward, o.half_precision);
    double seconds = compute_seconds(cost, o.topo.speed, o.eff);
    double comm = allreduce_seconds(view.comm_bytes[i].at(rows) * bytes_scale, p.tp, tp_link, o.eff);
    (i < forward ? fwd_s : bwd_s)[owner] += seconds + comm;
    comm_s[owner] += comm;
    if (i < forward) fwd_comm_s[owner] += comm;
  }

  // the stages the model is cut into: pp, or pp x v with virtual stages (rank r runs stages
  // r, r + pp, ...: its chunks)
  const int cut_into = p.stages();
  if (cuts.empty() && cut_into > 1) {
    auto key = std::make_tuple(p.tp, cut_into, rows_int);
    auto c = cache.cuts.find(key);
    if (c == cache.cuts.end()) {
      std::vector<double> node_s(forward);
      for (std::size_t i = 0; i < forward; ++i) node_s[i] = fwd_s[i] + bwd_s[i];
      auto found = balanced_cuts(a, cut_into, node_s, rows, bytes_scale / p.tp, pp_link, o.eff,
                                 o.lookups_first ? a.lookups_end : 0);
      if (!found) return found.error();
      c = cache.cuts.emplace(key, std::move(*found)).first;
    }
    cuts = c->second;
  }
  if (cuts.size() + 1 != static_cast<std::size_t>(cut_into))
    return make_error(errc::invalid_argument, "plan has " + std::to_string(cut_into) + " stages but " +
                                                  std::to_string(cuts.size()) + " stage cuts");
  if (o.lookups_first)
    if (auto st = lookups_in_first_stage(a, cuts); !st) return st.error();
  out.cuts = cuts;

  // Per stage: timings for the simulator, parameters, activations.
  const auto stages = static_cast<std::size_t>(cut_into);
  const auto ranks = static_cast<std::size_t>(p.pp);  // pipeline ranks: stage k runs on rank k % pp
  std::vector<stage_timing> timing(stages);
  std::vector<double> params(stages, 0.0), activations(stages, 0.0), layer_peak(stages, 0.0);
  // per micro-batch: sparse tables' entries, and their values alone
  std::vector<double> sparse_params(stages, 0.0), sparse_entries(stages, 0.0), sparse_values(stages, 0.0);
  double tp_comm = 0;
  std::vector<double> stage_fwd_comm(stages, 0.0), stage_bwd_comm(stages, 0.0);  // per micro-batch
  std::size_t s = 0, boundary = 0;
  double layer = 0;  // activations of the current layer (recompute keeps one layer's at a time)
  out.stages.assign(stages, {});
  std::vector<std::size_t> stage_of(forward, 0);  // each forward node's stage
  for (std::size_t i = 0; i < forward; ++i) {
    bool stage_starts = false;
    while (s < cuts.size() && i >= cuts[s]) ++s, stage_starts = true;
    stage_of[i] = s;
    bool layer_starts = i == 0 || stage_starts;
    while (boundary < a.boundaries.size() && a.boundaries[boundary] <= i)
      layer_starts = layer_starts || a.boundaries[boundary] == i, ++boundary;
    timing[s].forward_s += fwd_s[i];
    timing[s].backward_s += bwd_s[i] + (recompute ? fwd_s[i] : 0.0);
    out.stages[s].compute_comm_s += comm_s[i] * p.micro_batches;
    tp_comm += comm_s[i] * p.micro_batches;
    stage_fwd_comm[s] += fwd_comm_s[i];
    stage_bwd_comm[s] += comm_s[i] - fwd_comm_s[i] + (recompute ? fwd_comm_s[i] : 0.0);
    if (i < head) {  // the host holds these parameters and activations
      for (auto v : g.nodes()[i].inputs)
        if (g.value(v).kind == value_kind::parameter)
          host_params += static_cast<double>(g.value(v).type.shape.numel()) * 4.0;
      continue;
    }
    double bytes = view.activation_bytes[i].at(rows) * bytes_scale;
    if (auto logits = f32_loss_logits(o, g.nodes()[i]))  // the f32 softmax kept where the logits were
      bytes += a.value_bytes(*logits, rows) * (1.0 - bytes_scale) / p.tp;
    if (!recompute) {
      activations[s] += bytes;
    } else {
      if (layer_starts) activations[s] += a.cut_bytes(i, rows) * bytes_scale / p.tp, layer = 0;
      layer += bytes;
      layer_peak[s] = std::max(layer_peak[s], layer);
    }
    params[s] += view.param_bytes[i];
    sparse_params[s] += view.sparse_param_bytes[i];
    sparse_entries[s] += view.sparse_entry_bytes[i].at(rows);
    sparse_values[s] += view.sparse_value_bytes[i].at(rows);
  }
  if (o.overlap_tp_comm)  // each micro-batch's collectives beside its compute: the longer of the two
    for (std::size_t k = 0; k < stages; ++k) {
      timing[k].forward_s -= std::min(stage_fwd_comm[k], timing[k].forward_s - stage_fwd_comm[k]);
      timing[k].backward_s -= std::min(stage_bwd_comm[k], timing[k].backward_s - stage_bwd_comm[k]);
    }
  // the runtime's cost of running a task at all, slowed like compute where cores are shared
  for (auto& t : timing) t.forward_s += o.eff.per_task_seconds, t.backward_s += o.eff.per_task_seconds;
  double p2p_total = 0;
  for (std::size_t c = 0; c < cuts.size(); ++c) {
    double bytes = a.cut_bytes(cuts[c], rows) * bytes_scale / p.tp;
    timing[c].send_forward_s = p2p_seconds(bytes, pp_link, o.eff);
    timing[c + 1].send_backward_s = p2p_seconds(bytes, pp_link, o.eff);
    p2p_total += 2 * timing[c].send_forward_s * p.micro_batches;
  }
  double dp_comm = 0, peak = 0;
  const double slots = a.optimizer_slots;  // bytes of optimizer state per parameter byte
  // What a runtime that overlaps the data-parallel reduction leaves exposed on rank k (its
  // chunks' nodes): each node's share of `reduce` (by its gradient bytes) issued once the last
  // micro-batch's backward pass has passed it, and of `gather` before the first micro-batch's
  // forward reaches it; the node times scaled to the rank's timed passes.
  auto overlapped_reduction = [&](std::size_t k, double reduce, double gather) {
    std::vector<double> fwd, bwd, bytes;
    for (std::size_t i = head; i < forward; ++i) {
      if (stage_of[i] % ranks != k) continue;
      fwd.push_back(fwd_s[i]);
      bwd.push_back(bwd_s[i] + (recompute ? fwd_s[i] : 0.0));
      bytes.push_back(view.param_bytes[i] - (p.shard_params ? 0.0 : view.sparse_param_bytes[i]));
    }
    double fwd_total = 0, bwd_total = 0;
    for (std::size_t c = k; c < stages; c += ranks) fwd_total += timing[c].forward_s, bwd_total += timing[c].backward_s;
    return exposed_dp_seconds(std::move(fwd), std::move(bwd), bytes, fwd_total, bwd_total, reduce, gather);
  };
  // micro-batches each stage holds in flight: its rank's credit, or with virtual stages what
  // the rank's task order holds of that chunk at most
  std::vector<double> in_flight(stages, 0.0);
  if (p.virtual_stages == 1) {
    for (std::size_t k = 0; k < stages; ++k) in_flight[k] = p.buffer_size(static_cast<int>(k));
  } else {
    const auto order = build_schedule(p.pp, p.virtual_stages, p.micro_batches, [&](int r) { return p.buffer_size(r); });
    if (order.empty()) return make_error(errc::invalid_argument, "the pipeline schedule of " + describe(p) + " stalls");
    for (std::size_t k = 0; k < stages; ++k)
      in_flight[k] = most_in_flight(order[k % ranks], static_cast<int>(k / ranks));
  }
  // a rank's chunks as one: its parameters reduced and updated together (one flat buffer)
  if (ranks < stages)
    for (std::size_t k = ranks; k < stages; ++k) {
      const std::size_t r = k % ranks;
      params[r] += params[k], sparse_params[r] += sparse_params[k];
      sparse_entries[r] += sparse_entries[k], sparse_values[r] += sparse_values[k];
      params[k] = sparse_params[k] = sparse_entries[k] = sparse_values[k] = 0;
      activations[r] += activations[k] * in_flight[k] / std::max(1.0, in_flight[r]);
      layer_peak[r] = std::max(layer_peak[r], layer_peak[k]);
    }
  for (std::size_t k = 0; k < ranks; ++k) {
    double owned = p.shard_params ? params[k] / p.dp : params[k];
    // sparse tables (as the runtime does them): no dense gradient allreduced or applied; their
    // entries, every micro-batch's, all-gathered over dp, the touched rows updated (at most one
    // per entry, never more than the table). A sharded plan still reduce-scatters and gathers
    // the whole flat buffer.
    const double dense = params[k] - sparse_params[k];
    const double entries = sparse_entries[k] * p.micro_batches;  // one replica's, per step
    const double touched =
        std::min(sparse_params[k] / (p.shard_params ? p.dp : 1), sparse_values[k] * p.micro_batches * p.dp);
    const double updated = sparse_params[k] > 0 ? (p.shard_params ? dense / p.dp : dense) + touched : owned;
    const double grad_scale = o.f32_gradients ? 1.0 : bytes_scale;  // gradient bytes per parameter byte
    double grads = (p.shard_params ? params[k] : dense) * grad_scale;
    const double gather = p.shard_params ? all_gather_ring_seconds(params[k] * bytes_scale, p.dp, dp_link, o.eff) : 0;
    double reduce = p.shard_params ? reduce_scatter_ring_seconds(grads, p.dp, dp_link, o.eff)
                                   : allreduce_seconds(grads, p.dp, dp_link, o.eff);
    if (entries > 0 && p.dp > 1) reduce += all_gather_ring_seconds(entries * p.dp, p.dp, dp_link, o.eff);
    if (o.overlap_dp_reduction)  // only what outlasts the last backward and the first forward is exposed
      reduce = overlapped_reduction(k, reduce, gather);
    else
      reduce += gather;
    // the optimizer streams parameters, gradients and state once
    double update = optimizer_seconds(updated * (3.0 + 2.0 * slots), o.topo.speed, o.eff);
    timing[k].update_s = reduce + update;
    out.stages[k].update_comm_s = reduce;  // scaled to the task's wall time below
    dp_comm = std::max(dp_comm, reduce);
    // parameters and gradients in the compute type, gradients in f32 where the runtime keeps
    // them so (a sparse table's gradient is its entries, never a dense table, unless a
    // sharded plan's flat buffer holds one); master weights
    // (mixed precision) and optimizer state on the owner
    double memory = (params[k] + entries) * bytes_scale + grads + owned * (slots + (o.half_precision ? 1.0 : 0.0)) +
                    activations[k] * in_flight[k] + layer_peak[k];
    peak = std::max(peak, memory);
  }
  const std::size_t first = on_host ? 1 : 0;  // the simulator's index of the first accelerator stage
  if (on_host) {
    // the host stage in front: the first layer's activation over the host link, its
    // gradients reduced over dp and its optimizer on the host
    const auto& host = *o.topo.host;
    double handoff = p2p_seconds(a.cut_bytes(head, rows) * bytes_scale / p.tp, host.link, o.eff);
    host_stage.send_forward_s = handoff;
    timing[0].send_backward_s = handoff;
    double owned = p.shard_params ? host_params / p.dp : host_params;
    host_stage.update_s = allreduce_seconds(host_params * bytes_scale, p.dp, dp_link, o.eff) +
                          owned * (3.0 + 2.0 * slots) / (host.speed.memory_bytes_per_s * host.eff.memory);
    double host_memory = host_params * 2.0 * bytes_scale + owned * (slots + (o.half_precision ? 1.0 : 0.0)) +
                         a.cut_bytes(head, rows) * bytes_scale * p.micro_batches;
    if (host_memory > host.memory_bytes * o.memory_margin) {
      out.fits = false;
      char buf[160];
      std::snprintf(buf, sizeof buf, "the host side needs %.3g GB, %.0f%% of %.3g GB may be used", host_memory / 1e9,
                    100 * o.memory_margin, host.memory_bytes / 1e9);
      out.rejected = buf;
    }
    host_stage.forward_s += o.eff.per_task_seconds, host_stage.backward_s += o.eff.per_task_seconds;
    timing.insert(timing.begin(), host_stage);
  }
  const int sim_stages = p.pp + static_cast<int>(first);
  auto sim = p.virtual_stages > 1
                 ? simulate_step(
                       p.pp, p.virtual_stages, p.micro_batches, timing, [&](int r) { return p.buffer_size(r); },
                       core_sharing{o.topo.shared_cores, p.dp * p.tp})
                 : simulate_step(
                       sim_stages, p.micro_batches, timing,
                       [&](int st) {
                         return p.schedule == schedule_kind::gpipe ? p.micro_batches
                                                                   : std::min(p.micro_batches, sim_stages - st);
                       },
                       core_sharing{o.topo.shared_cores, p.dp * p.tp});
  if (sim.task_wall_s.size() != ranks + first)
    return make_error(errc::invalid_argument, "the pipeline schedule of " + describe(p) + " stalls");
  // a rank's chunks are one rank of the runtime: their tensor-parallel collectives together
  for (std::size_t k = ranks; k < stages; ++k) out.stages[k % ranks].compute_comm_s += out.stages[k].compute_comm_s;
  out.stages.resize(ranks);
  // what each accelerator rank's tasks take from start to end, as the runtime measures them
  for (std::size_t k = 0; k < ranks; ++k) {
    out.stages[k].forward_s = sim.task_wall_s[k + first][0];
    out.stages[k].backward_s = sim.task_wall_s[k + first][1];
    out.stages[k].update_s = sim.task_wall_s[k + first][2];
    // the reduction's share of the update task, slowed as the task was where cores are shared
    const double work = timing[k + first].update_s;
    if (work > 0) out.stages[k].update_comm_s *= out.stages[k].update_s / work;
  }
  out.step_s = sim.step_s + o.eff.step_overhead_seconds(p.ranks());
  out.bubble = sim.bubble;
  out.comm_s = tp_comm / p.pp + p2p_total / p.pp + dp_comm;
  out.peak_memory_bytes = peak;
  if (out.fits && peak > o.topo.memory_bytes * o.memory_margin) {
    out.fits = false;
    char buf[160];
    std::snprintf(buf, sizeof buf, "needs %.3g GB per device, %.0f%% of %.3g GB may be used", peak / 1e9,
                  100 * o.memory_margin, o.topo.memory_bytes / 1e9);
    out.rejected = buf;
  }
  return out;
}

}  // namespace

double f32_loss_bytes_per_logit(bool backward, bool half_precision) {
  const double convert = half_precision ? 2.0 + 4.0 : 0.0;
  return backward ? 8.0 + convert : convert + 4.0 + 8.0 + 8.0 + 4.0 + 8.0;
}

std::string describe(const planned& p) {
  return describe(p.plan) + (p.recompute ? " recompute" : "") + (p.embedding_on_host ? " embedding-on-host" : "");
}

std::string describe(const parallel_plan& p) {
  std::string out = "dp" + std::to_string(p.dp) + " tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) +
                    (p.virtual_stages > 1 ? " v" + std::to_string(p.virtual_stages) : std::string()) + " m" +
                    std::to_string(p.micro_batches);
  if (p.pp > 1) out += std::string(" ") + to_string(p.schedule);
  if (p.shard_params) out += " sharded";
  return out;
}

status lookups_in_first_stage(const model_analysis& a, const std::vector<std::size_t>& cuts) {
  if (cuts.empty() || cuts.front() >= a.lookups_end) return {};
  return make_error(errc::invalid_argument,
                    "the heterogeneous pipeline keeps every embedding lookup in the first stage: its cut must be at "
                    "forward node " +
                        std::to_string(a.lookups_end) + " or later, not " + std::to_string(cuts.front()));
}

result<std::vector<std::size_t>> even_layer_cuts(const model_analysis& a, int stages) {
  const std::size_t layers = a.layer_starts.size();
  const auto n = static_cast<std::size_t>(std::max(1, stages));
  if (layers == 0)
    return make_error(errc::invalid_argument,
                      "the model has no repeated layers (consecutive top-level scopes alike) to split evenly");
  if (layers % n != 0)
    return make_error(errc::invalid_argument, std::to_string(layers) + " layers do not split evenly into " +
                                                  std::to_string(n) + " pipeline stages");
  std::vector<std::size_t> cuts;
  for (std::size_t c = 1; c < n; ++c) cuts.push_back(a.layer_starts[c * (layers / n)]);
  return cuts;
}

result<std::vector<std::size_t>> stage_cuts(const model_analysis& a, const parallel_plan& p, const search_options& o) {
  auto e = evaluate_plan(a, p, o);
  if (!e) return e.error();
  return e->cuts;
}

result<planned> evaluate_plan(const model_analysis& a, const parallel_plan& p, const search_options& o,
                              const std::vector<std::size_t>& given_cuts, bool recompute, bool embedding_on_host) {
  search_cache cache;
  return evaluate(a, p, o, given_cuts, recompute, embedding_on_host, cache);
}

result<std::vector<planned>> rank_plans(const model_analysis& a, const search_options& o) {
  std::vector<planned> fitting, rejected;
  search_cache cache;
  const int n = o.topo.devices;
  const std::size_t forward = a.forward_nodes();
  for (int tp = 1; tp <= n; ++tp) {
    if (n % tp != 0) continue;
    if (!o.tp_across_machines && tp > std::max(1, o.topo.devices_per_machine)) break;
    if (!a.completion(tp)) continue;  // the model's shapes cannot take this degree
    // at most one stage per layer (per operation for graphs too small to have layers)
    const std::size_t most_stages = forward < 200 ? forward : a.boundaries.size() + 1;
    for (int pp = 1; pp <= n / tp && static_cast<std::size_t>(pp) <= most_stages; ++pp) {
      if ((n / tp) % pp != 0) continue;
      const int dp = n / tp / pp;
      if (o.batch < dp) continue;
      // every split of the batch into dp x m near-equal shares (a batch of 280 over a
      // 35-stage pipeline wants 280 micro-batches, not the 8 a power of two allows; 128 rows
      // over 3 replicas are 43 + 43 + 42)
      bool whole_batch_fits = false;  // pp = 1, m = 1 fits without recomputation
      for (int m = 1; m <= o.max_micro_batches && static_cast<std::int64_t>(m) * dp <= o.batch; ++m) {
        // without a pipeline, micro-batches (gradient accumulation) only add overhead: they
        // are candidates only for the memory they save
        if (pp == 1 && m > 1 && whole_batch_fits) break;
        for (int sched = 0; sched < (pp > 1 && m > 1 && o.consider_gpipe ? 2 : 1); ++sched)
          for (int v : o.virtual_stages)
            for (int shard = 0; shard < (dp > 1 ? 2 : 1); ++shard) {
              // interleaved 1F1B: 1F1B with micro-batches in groups of pp, a stage per layer at most
              if (v > 1 && (pp < 2 || sched != 0 || m % pp != 0 ||
                            static_cast<std::size_t>(pp) * static_cast<std::size_t>(v) > most_stages))
                continue;
              parallel_plan p{.dp = dp,
                              .tp = tp,
                              .pp = pp,
                              .micro_batches = m,
                              .schedule = sched == 0 ? schedule_kind::one_f_one_b : schedule_kind::gpipe,
                              .shard_params = shard == 1,
                              .virtual_stages = v};
              for (int rc = 0; rc < (o.allow_recompute ? 2 : 1); ++rc)
                for (int host = 0; host < (o.topo.host && !a.boundaries.empty() && v == 1 ? 2 : 1); ++host) {
                  auto r = evaluate(a, p, o, {}, rc == 1, host == 1, cache);
                  if (!r) break;  // e.g. more stages than the model has layers
                  if (pp == 1 && m == 1 && rc == 0 && r->fits) whole_batch_fits = true;
                  (r->fits ? fitting : rejected).push_back(std::move(*r));
                }
            }
      }
    }
  }
  auto by_time = [](const planned& x, const planned& y) { return x.step_s < y.step_s; };
  std::stable_sort(fitting.begin(), fitting.end(), by_time);
  std::stable_sort(rejected.begin(), rejected.end(),
                   [](const planned& x, const planned& y) { return x.peak_memory_bytes < y.peak_memory_bytes; });
  fitting.insert(fitting.end(), rejected.begin(), rejected.end());
  prefer_simpler_near_ties(fitting);
  return fitting;
}

std::size_t prefer_simpler_near_ties(std::vector<planned>& ranked, double within) {
  if (ranked.empty() || !ranked.front().fits) return 0;
  auto fastest = std::min_element(ranked.begin(), ranked.end(), [](const planned& x, const planned& y) {
    return x.fits && (!y.fits || x.step_s < y.step_s);
  });
  const double limit = fastest->step_s * (1 + within);
  auto synchronisations = [](const planned& p) {
    return std::tuple{p.plan.shard_params, p.plan.micro_batches, p.plan.schedule == schedule_kind::gpipe,
                      p.plan.virtual_stages};
  };
  auto chosen = fastest;
  for (auto it = ranked.begin(); it != ranked.end(); ++it)
    if (it->fits && it->step_s <= limit && synchronisations(*it) < synchronisations(*chosen)) chosen = it;
  const auto f = static_cast<std::size_t>(fastest - ranked.begin()),
             c = static_cast<std::size_t>(chosen - ranked.begin());
  std::rotate(ranked.begin(), chosen, chosen + 1);  // [0, c) move one down
  return f == c ? 0 : f < c ? f + 1 : f;
}

std::string what_would_fit(const model_analysis& a, const search_options& o) {
  std::string out;
  char line[320];
  auto ranked = rank_plans(a, o);
  if (!ranked || ranked->empty()) {
    std::snprintf(line, sizeof line,
                  "no plan splits the batch of %lld over %d devices; a batch of at least %d rows would\n",
                  static_cast<long long>(o.batch), o.topo.devices, o.topo.devices);
    return line;
  }
  const planned& least =
      ranked->back().fits ? ranked->front()
                          : *std::min_element(ranked->begin(), ranked->end(), [](const planned& x, const planned& y) {
                              return x.peak_memory_bytes < y.peak_memory_bytes;
                            });
  std::snprintf(line, sizeof line,
                "the leanest plan on %d devices (%s) needs %.3g GB per device; %.3g GB may be used "
                "(sharded optimizer state and up to %d micro-batches were considered)\n",
                o.topo.devices, describe(least).c_str(), least.peak_memory_bytes / 1e9,
                o.topo.memory_bytes * o.memory_margin / 1e9, o.max_micro_batches);
  out += line;
  // more devices of the same kind
  for (int factor = 2; factor <= 64; factor *= 2) {
    search_options more = o;
    more.topo.devices = o.topo.devices * factor;
    auto r = rank_plans(a, more);
    if (r && !r->empty() && r->front().fits) {
      std::snprintf(line, sizeof line, "would fit: %d devices (%s, %.3g GB per device)\n", more.topo.devices,
                    describe(r->front()).c_str(), r->front().peak_memory_bytes / 1e9);
      out += line;
      break;
    }
  }
  // smaller micro-batches: every split of the batch
  if (o.max_micro_batches < o.batch) {
    search_options finer = o;
    finer.max_micro_batches = static_cast<int>(std::min<std::int64_t>(o.batch, 1 << 20));
    auto r = rank_plans(a, finer);
    if (r && !r->empty() && r->front().fits) {
      std::snprintf(line, sizeof line, "would fit: smaller micro-batches (%s)\n", describe(r->front()).c_str());
      out += line;
    }
  }
  // a smaller batch
  for (std::int64_t b = o.batch / 2; b >= 1; b /= 2) {
    search_options smaller = o;
    smaller.batch = b;
    auto r = rank_plans(a, smaller);
    if (r && !r->empty() && r->front().fits) {
      std::snprintf(line, sizeof line, "would fit: a batch of %lld (%s)\n", static_cast<long long>(b),
                    describe(r->front()).c_str());
      out += line;
      break;
    }
  }
  std::snprintf(line, sizeof line, "would fit: devices with %.3g GB each\n",
                least.peak_memory_bytes / o.memory_margin / 1e9);
  out += line;
  return out;
}

std::string explain(const std::vector<planned>& ranked, std::size_t rows) {
  std::string out = "  #  plan                                    step (ms)  memory (GB)  bubble   comm\n";
  char line[320];
  for (std::size_t i = 0; i < ranked.size() && i < rows; ++i) {
    const planned& r = ranked[i];
    std::snprintf(line, sizeof line, "%3zu  %-38s %10.3f %12.4g %6.1f%% %5.1f%%%s%s\n", i + 1, describe(r).c_str(),
                  r.step_s * 1e3, r.peak_memory_bytes / 1e9, 100 * r.bubble,
                  r.step_s > 0 ? 100 * std::min(1.0, r.comm_s / r.step_s) : 0.0,
                  r.fits ? "" : "  rejected: ", r.fits ? "" : r.rejected.c_str());
    out += line;
  }
  return out;
}

double model_flops(const model_analysis& a, std::int64_t batch) {
  double total = 0;
  for (const auto& c : a.node_cost) total += c.at(static_cast<double>(batch)).flops;
  return total;
}

}  // namespace cohort::planner
