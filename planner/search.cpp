// Plan evaluation (costs, stage cuts, simulation, memory) and the search over plans.
#include "planner/search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "planner/simulator.hpp"

namespace cohort::planner {
namespace {

// What one node costs under a tensor-parallel degree: compute split or not, and the
// communication its operands need (bytes = fixed + per_row * rows).
struct node_under_tp {
  bool split = false;
  double comm_fixed = 0, comm_per_row = 0;  // allreduce-equivalent bytes over the tp group
};

std::vector<node_under_tp> tp_costs(const model_analysis& a, const axis_completion& c) {
  const graph& g = *a.g;
  std::vector<node_under_tp> out(g.nodes().size());
  for (std::size_t i = 0; i < g.nodes().size(); ++i) {
    const node& n = g.nodes()[i];
    for (std::size_t j = 0; j < n.inputs.size(); ++j) {
      const placement& have = c.placement_of(n.inputs[j]);
      const placement& need = c.required[i][j];
      if (as_shard(need) != nullptr) out[i].split = true;
      if (have == need || (is_replicate(have) && as_shard(need) != nullptr)) continue;  // a local slice is free
      // all-gather and reduce-scatter move half what an allreduce moves
      double weight = is_partial(have) && is_replicate(need) ? 1.0 : 0.5;
      out[i].comm_fixed += weight * a.value_bytes_fixed[static_cast<std::size_t>(n.inputs[j])];
      out[i].comm_per_row += weight * a.value_bytes_per_row[static_cast<std::size_t>(n.inputs[j])];
    }
  }
  // gradients placed unlike their parameters are fixed up at the end of the backward pass
  for (auto [p, d] : a.grads.param_grads)
    if (!(c.placement_of(p) == c.placement_of(d))) {
      auto producer = static_cast<std::size_t>(g.value(d).producer);
      out[producer].comm_fixed += a.value_bytes_fixed[static_cast<std::size_t>(d)];
      out[producer].comm_per_row += a.value_bytes_per_row[static_cast<std::size_t>(d)];
    }
  return out;
}

// Bytes alive across a cut before forward node `j` (activations one stage hands the next).
double cut_bytes(const model_analysis& a, std::size_t j, double rows) {
  const graph& g = *a.g;
  double bytes = 0;
  std::vector<bool> counted(g.num_values(), false);
  for (std::size_t i = j; i < a.grads.backward_begin; ++i)
    for (auto v : g.nodes()[i].inputs) {
      auto p = g.value(v).producer;
      if (p < 0 || static_cast<std::size_t>(p) >= j || counted[static_cast<std::size_t>(v)]) continue;
      counted[static_cast<std::size_t>(v)] = true;
      bytes += a.value_bytes(v, rows);
    }
  return bytes;
}

link_speed link_for(const topology& t, int span) { return span <= t.devices_per_machine ? t.intra : t.inter; }

}  // namespace

std::string describe(const parallel_plan& p) {
  std::string out = "dp" + std::to_string(p.dp) + " tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) + " m" +
                    std::to_string(p.micro_batches);
  if (p.pp > 1) out += std::string(" ") + to_string(p.schedule);
  if (p.shard_params) out += " sharded";
  return out;
}

result<planned> evaluate_plan(const model_analysis& a, const parallel_plan& p, const search_options& o,
                              const std::vector<std::size_t>& given_cuts) {
  planned out;
  out.plan = p;
  if (auto st = validate(p, o.batch); !st) return st.error();
  auto comp = a.completion(p.tp);
  if (!comp) return comp.error();
  const graph& g = *a.g;
  const double rows = static_cast<double>(o.batch / (static_cast<std::int64_t>(p.dp) * p.micro_batches));
  const std::size_t forward = a.grads.backward_begin;
  const topology& t = o.topo;
  const link_speed tp_link = link_for(t, p.tp), pp_link = link_for(t, p.tp * p.pp), dp_link = link_for(t, p.tp * p.pp * p.dp);
  auto under_tp = tp_costs(a, **comp);

  // Time per micro-batch charged to each forward node (its own and its backward nodes').
  std::vector<double> fwd_s(forward, 0.0), bwd_s(forward, 0.0), comm_s(forward, 0.0);
  for (std::size_t i = 0; i < g.nodes().size(); ++i) {
    op_profile cost = a.node_cost[i].at(rows);
    if (under_tp[i].split) cost = {cost.flops / p.tp, cost.bytes / p.tp, cost.gemm};
    double seconds = compute_seconds(cost, t.speed, o.eff);
    double comm = allreduce_ring_seconds(under_tp[i].comm_fixed + under_tp[i].comm_per_row * rows, p.tp, tp_link, o.eff);
    auto owner = static_cast<std::size_t>(a.owner[i]);
    (i < forward ? fwd_s : bwd_s)[owner] += seconds + comm;
    comm_s[owner] += comm;
  }

  // Stage cuts: given, or dynamic programming over the layer boundaries for the least
  // loaded busiest stage.
  std::vector<std::size_t> cuts = given_cuts;
  if (cuts.empty() && p.pp > 1) {
    std::vector<std::size_t> candidates = a.boundaries;
    if (candidates.size() + 1 < static_cast<std::size_t>(p.pp) || forward < 200) {
      candidates.clear();
      for (std::size_t i = 1; i < forward; ++i) candidates.push_back(i);
    }
    if (candidates.size() + 1 < static_cast<std::size_t>(p.pp))
      return make_error(errc::invalid_argument, "cannot cut " + std::to_string(forward) + " forward operations into " +
                                                    std::to_string(p.pp) + " pipeline stages");
    std::vector<std::size_t> pos{0};
    pos.insert(pos.end(), candidates.begin(), candidates.end());
    pos.push_back(forward);
    std::vector<double> prefix(forward + 1, 0.0);
    for (std::size_t i = 0; i < forward; ++i) prefix[i + 1] = prefix[i] + fwd_s[i] + bwd_s[i];
    const std::size_t k = pos.size();
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> cross(k, 0.0);
    for (std::size_t c = 1; c + 1 < k; ++c) cross[c] = 2 * p2p_seconds(cut_bytes(a, pos[c], rows), pp_link, o.eff);
    std::vector<std::vector<double>> best(static_cast<std::size_t>(p.pp) + 1, std::vector<double>(k, inf));
    std::vector<std::vector<std::size_t>> from(static_cast<std::size_t>(p.pp) + 1, std::vector<std::size_t>(k, 0));
    best[0][0] = 0;
    for (std::size_t s = 1; s <= static_cast<std::size_t>(p.pp); ++s)
      for (std::size_t j = s; j < k; ++j) {
        if (s == static_cast<std::size_t>(p.pp) && j != k - 1) continue;
        for (std::size_t i = s - 1; i < j; ++i) {
          if (best[s - 1][i] == inf) continue;
          double v = std::max(best[s - 1][i], prefix[pos[j]] - prefix[pos[i]] + cross[i] + (j + 1 < k ? cross[j] : 0));
          if (v < best[s][j]) best[s][j] = v, from[s][j] = i;
        }
      }
    std::size_t j = k - 1;
    for (std::size_t s = static_cast<std::size_t>(p.pp); s > 1; --s) {
      j = from[s][j];
      cuts.push_back(pos[j]);
    }
    std::reverse(cuts.begin(), cuts.end());
  }
  out.cuts = cuts;

  // Per stage: timings for the simulator, parameters, activations.
  std::vector<stage_timing> timing(static_cast<std::size_t>(p.pp));
  std::vector<double> params(static_cast<std::size_t>(p.pp), 0.0), activations(static_cast<std::size_t>(p.pp), 0.0);
  double tp_comm = 0;
  std::vector<bool> counted(g.num_values(), false);
  auto stage_of = [&](std::size_t i) {
    return static_cast<std::size_t>(std::upper_bound(cuts.begin(), cuts.end(), i) - cuts.begin());
  };
  for (std::size_t i = 0; i < forward; ++i) {
    std::size_t s = stage_of(i);
    timing[s].forward_s += fwd_s[i];
    timing[s].backward_s += bwd_s[i];
    tp_comm += comm_s[i] * p.micro_batches;
    for (auto v : g.nodes()[i].outputs) {
      const shard* sh = as_shard((*comp)->placement_of(v));
      activations[s] += a.value_bytes(v, rows) / (sh != nullptr ? p.tp : 1);
    }
    for (auto v : g.nodes()[i].inputs)
      if (g.value(v).kind == value_kind::parameter && !counted[static_cast<std::size_t>(v)]) {
        counted[static_cast<std::size_t>(v)] = true;  // a parameter lives on the stage that reads it first
        const shard* sh = as_shard((*comp)->placement_of(v));
        params[s] += static_cast<double>(g.value(v).type.shape.numel()) * 4.0 / (sh != nullptr ? p.tp : 1);
      }
  }
  double p2p_total = 0;
  for (std::size_t c = 0; c < cuts.size(); ++c) {
    double bytes = cut_bytes(a, cuts[c], rows) / p.tp;
    timing[c].send_forward_s = p2p_seconds(bytes, pp_link, o.eff);
    timing[c + 1].send_backward_s = p2p_seconds(bytes, pp_link, o.eff);
    p2p_total += 2 * timing[c].send_forward_s * p.micro_batches;
  }
  double dp_comm = 0, peak = 0;
  const double slots = optimizer_state_factor(a.optimizer_slots);
  for (std::size_t s = 0; s < timing.size(); ++s) {
    double owned = p.shard_params ? params[s] / p.dp : params[s];
    double reduce = p.shard_params
        ? reduce_scatter_ring_seconds(params[s], p.dp, dp_link, o.eff) + all_gather_ring_seconds(params[s], p.dp, dp_link, o.eff)
        : allreduce_ring_seconds(params[s], p.dp, dp_link, o.eff);
    double update = owned * (3.0 + 2.0 * slots) / (t.speed.memory_bytes_per_s * o.eff.memory);
    timing[s].update_s = reduce + update;
    dp_comm = std::max(dp_comm, reduce);
    double memory = params[s] * 2.0 + owned * slots + activations[s] * p.buffer_size(static_cast<int>(s));
    peak = std::max(peak, memory);
  }
  auto sim = simulate_step(p.pp, p.micro_batches, timing, [&](int s) { return p.buffer_size(s); });
  out.step_s = sim.step_s;
  out.bubble = sim.bubble;
  out.comm_s = tp_comm / p.pp + p2p_total / std::max(1, p.pp) + dp_comm;
  out.peak_memory_bytes = peak;
  if (peak > t.memory_bytes * o.memory_margin) {
    out.fits = false;
    char buf[128];
    std::snprintf(buf, sizeof buf, "needs %.1f GB per device, has %.1f GB", peak / 1e9, t.memory_bytes / 1e9);
    out.rejected = buf;
  }
  return out;
}

result<std::vector<planned>> rank_plans(const model_analysis& a, const search_options& o) {
  std::vector<planned> fitting, rejected;
  const int n = o.topo.devices;
  for (int tp = 1; tp <= n; ++tp) {
    if (n % tp != 0) continue;
    if (!a.completion(tp)) continue;  // the model's shapes cannot take this degree
    for (int pp = 1; pp <= n / tp; ++pp) {
      if ((n / tp) % pp != 0) continue;
      const int dp = n / tp / pp;
      if (o.batch % dp != 0) continue;
      for (int m = 1; m <= o.max_micro_batches && m <= o.batch / dp; m *= 2) {
        if ((o.batch / dp) % m != 0) continue;
        for (int sched = 0; sched < (pp > 1 && o.consider_gpipe ? 2 : 1); ++sched)
          for (int shard = 0; shard < (dp > 1 ? 2 : 1); ++shard) {
            parallel_plan p{.dp = dp, .tp = tp, .pp = pp, .micro_batches = m,
                            .schedule = sched == 0 ? schedule_kind::one_f_one_b : schedule_kind::gpipe,
                            .shard_params = shard == 1};
            auto r = evaluate_plan(a, p, o);
            if (!r) continue;  // e.g. more stages than layers
            (r->fits ? fitting : rejected).push_back(std::move(*r));
          }
      }
    }
  }
  auto by_time = [](const planned& x, const planned& y) { return x.step_s < y.step_s; };
  std::sort(fitting.begin(), fitting.end(), by_time);
  std::sort(rejected.begin(), rejected.end(), [](const planned& x, const planned& y) {
    return x.peak_memory_bytes < y.peak_memory_bytes;
  });
  fitting.insert(fitting.end(), rejected.begin(), rejected.end());
  return fitting;
}

std::string explain(const std::vector<planned>& ranked, std::size_t rows) {
  std::string out = "  #  plan                           step (ms)  memory (GB)  bubble  comm   \n";
  char line[256];
  for (std::size_t i = 0; i < ranked.size() && i < rows; ++i) {
    const planned& r = ranked[i];
    std::snprintf(line, sizeof line, "%3zu  %-30s %10.3f %12.3f %6.1f%% %5.1f%%  %s\n", i + 1, describe(r.plan).c_str(),
                  r.step_s * 1e3, r.peak_memory_bytes / 1e9, 100 * r.bubble,
                  r.step_s > 0 ? 100 * std::min(1.0, r.comm_s / r.step_s) : 0.0, r.fits ? "" : r.rejected.c_str());
    out += line;
  }
  return out;
}

}  // namespace cohort::planner
