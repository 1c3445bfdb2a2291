// Roofline compute times and alpha-beta communication times.
#include "planner/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace cohort::planner {

op_profile profile_of(const graph& g, const node& n, std::int64_t rows) {
  op_profile p;
  double bytes = 0;
  for (auto v : n.inputs) bytes += static_cast<double>(g.value(v).type.shape.numel()) * 4.0;
  for (auto v : n.outputs) bytes += static_cast<double>(g.value(v).type.shape.numel()) * 4.0;
  if (n.kind == op_kind::embedding || n.kind == op_kind::embedding_bag) {
    // a lookup reads the rows its ids name, not the table
    const shape& table = g.value(n.inputs[0]).type.shape;
    bytes -= static_cast<double>(table.numel()) * 4.0;
    bytes += static_cast<double>(g.value(n.inputs[1]).type.shape.numel()) * static_cast<double>(table[1]) * 4.0;
  }
  p.bytes = bytes;
  if (n.kind == op_kind::matmul) {
    const auto& at = std::get<matmul_attrs>(n.attrs);
    const shape& a = g.value(n.inputs[0]).type.shape;
    double k = static_cast<double>(at.trans_a ? a.at(-2) : a.at(-1));
    p.flops = 2.0 * static_cast<double>(g.value(n.outputs[0]).type.shape.numel()) * k;
    p.gemm = true;
  } else if (n.kind == op_kind::attention || n.kind == op_kind::attention_grad) {
    // two GEMMs forward (q k^T, p v); five backward (the scores again, dp, dv, dq, dk), as
    // flash attention computes them; a causal row sees only the keys up to its own position
    const auto& at = std::get<attention_attrs>(n.attrs);
    const shape& q = g.value(n.inputs[n.kind == op_kind::attention ? 0 : 1]).type.shape;
    const shape& k = g.value(n.inputs[n.kind == op_kind::attention ? 1 : 2]).type.shape;
    double slices = 1;
    for (int i = 0; i + 2 < q.rank(); ++i) slices *= static_cast<double>(q[i]);
    const double t = static_cast<double>(q.at(-2)), s = static_cast<double>(k.at(-2));
    const double pairs = at.causal ? t * (t + 1) / 2 : t * s;
    p.flops = (n.kind == op_kind::attention ? 4.0 : 10.0) * slices * pairs * static_cast<double>(q.at(-1));
    p.gemm = true;
    p.attention = true;
  } else {
    p.flops = 0;
    for (auto v : n.outputs) p.flops += static_cast<double>(g.value(v).type.shape.numel());
  }
  double r = static_cast<double>(std::max<std::int64_t>(rows, 1));
  p.flops /= r;
  p.bytes /= r;
  return p;
}

double efficiency::gemm_at(double flops) const {
  if (gemm_by_flops.empty() || !(flops > 0)) return gemm;
  if (flops <= gemm_by_flops.front()[0]) return gemm_by_flops.front()[1];
  if (flops >= gemm_by_flops.back()[0]) return gemm_by_flops.back()[1];
  std::size_t i = 1;
  while (gemm_by_flops[i][0] < flops) ++i;
  const auto& lo = gemm_by_flops[i - 1];
  const auto& hi = gemm_by_flops[i];
  const double t = std::log(flops / lo[0]) / std::log(hi[0] / lo[0]);
  return lo[1] + t * (hi[1] - lo[1]);
}

std::string efficiency_problem(const efficiency& e) {
  auto check = [](const std::string& field, double v) -> std::string {
    char b[200];
    if (!(v > 0)) {
      std::snprintf(b, sizeof b, "%s is %.4g: an efficiency must be positive", field.c_str(), v);
      return b;
    }
    if (v > 1) {
      std::snprintf(b, sizeof b,
                    "%s is %.4g, above 1: a fraction of the peak cannot exceed it (the peak was never measured)",
                    field.c_str(), v);
      return b;
    }
    return "";
  };
  for (auto [field, v] : {std::pair<const char*, double>{"efficiency.gemm", e.gemm},
                          {"efficiency.memory", e.memory},
                          {"efficiency.link", e.link}})
    if (auto m = check(field, v); !m.empty()) return m;
  if (e.attention != 0)
    if (auto m = check("efficiency.attention", e.attention); !m.empty()) return m;
  for (std::size_t i = 0; i < e.gemm_by_flops.size(); ++i) {
    const std::string at = "efficiency.gemm_by_flops[" + std::to_string(i) + "]";
    if (!(e.gemm_by_flops[i][0] > 0)) return at + ": the FLOPs must be positive";
    if (i > 0 && !(e.gemm_by_flops[i][0] > e.gemm_by_flops[i - 1][0])) return at + ": the FLOPs must ascend";
    if (auto m = check(at, e.gemm_by_flops[i][1]); !m.empty()) return m;
  }
  return "";
}

double compute_seconds(const op_profile& p, const device_speed& d, const efficiency& e) {
  const double gemm_eff = p.attention && e.attention > 0 ? e.attention : p.gemm ? e.gemm_at(p.flops) : e.gemm;
  // calibrated at two shapes: arithmetic and operand traffic each at its measured rate, both
  // scaled by the GEMM efficiency the refit fits (skinny GEMMs are traffic-heavy)
  if (p.gemm && d.gemm_bytes_per_s > 0)
    return (p.flops / d.flops_per_s + p.bytes / d.gemm_bytes_per_s) / gemm_eff + e.per_op_seconds;
  double flop_s = p.gemm ? p.flops / (d.flops_per_s * gemm_eff) : 0.0;
  const bool cached = d.cache_bytes > 0 && d.cache_bytes_per_s > 0 && p.bytes <= d.cache_bytes;
  double byte_s = p.bytes / ((cached ? d.cache_bytes_per_s : d.memory_bytes_per_s) * e.memory);
  // A CPU BLAS packs a GEMM's operands into blocks before it multiplies them (once per call):
  // the traffic adds to the arithmetic instead of hiding under it. A 16-row GEMM with a
  // 784 x 256 weight spends half its time packing the weight (measured here: 82 us, of which
  // 41 us arithmetic), which is why small micro-batches cost more than their FLOPs.
  if (p.gemm) return (d.gemm_packs_operands ? flop_s + byte_s : std::max(flop_s, byte_s)) + e.per_op_seconds;
  return byte_s + e.per_op_seconds;
}

double optimizer_seconds(double bytes, const device_speed& d, const efficiency& e) {
  if (bytes <= 0) return 0;
  if (d.optimizer_bytes_per_s > 0) return bytes / d.optimizer_bytes_per_s + e.per_op_seconds;
  return compute_seconds({0.0, bytes, false}, d, e);
}

// Nothing to send costs nothing: the runtime sends no message then (a tensor-parallel node
// whose inputs already have the placement it needs must not be charged a collective's latency).
double p2p_seconds(double bytes, const link_cost& l, const efficiency& e) {
  if (bytes <= 0) return 0;
  return l.latency_s + bytes / (l.bandwidth_bytes_per_s * e.link);
}

double allreduce_ring_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e) {
  if (ranks <= 1 || bytes <= 0) return 0;
  double n = ranks;
  return 2.0 * (n - 1.0) * (l.latency_s + bytes / n / (l.bandwidth_bytes_per_s * e.link));
}

double allreduce_recursive_doubling_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e) {
  if (ranks <= 1 || bytes <= 0) return 0;
  return std::log2(static_cast<double>(ranks)) * (l.latency_s + bytes / (l.bandwidth_bytes_per_s * e.link));
}

bool allreduce_uses_recursive_doubling(double bytes, int ranks) {
  const bool power_of_two = ranks > 1 && (ranks & (ranks - 1)) == 0;
  return power_of_two && bytes <= (ranks == 2 ? 1024.0 * 1024.0 : 64.0 * 1024.0);
}

double allreduce_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e) {
  return allreduce_uses_recursive_doubling(bytes, ranks) ? allreduce_recursive_doubling_seconds(bytes, ranks, l, e)
                                                         : allreduce_ring_seconds(bytes, ranks, l, e);
}

double reduce_scatter_ring_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e) {
  if (ranks <= 1 || bytes <= 0) return 0;
  double n = ranks;
  return (n - 1.0) * (l.latency_s + bytes / n / (l.bandwidth_bytes_per_s * e.link));
}

double all_gather_ring_seconds(double bytes, int ranks, const link_cost& l, const efficiency& e) {
  return reduce_scatter_ring_seconds(bytes, ranks, l, e);
}

double exposed_after_backward(const std::vector<double>& backward_s, const std::vector<double>& reduce_s) {
  double pass = 0, link = 0;  // when the pass and the link are done
  for (std::size_t k = 0; k < backward_s.size() && k < reduce_s.size(); ++k) {
    pass += backward_s[k];
    link = std::max(link, pass) + reduce_s[k];
  }
  return std::max(0.0, link - pass);
}

double exposed_before_forward(const std::vector<double>& forward_s, const std::vector<double>& gather_s) {
  double gathered = 0, pass = 0, compute = 0;
  for (std::size_t k = 0; k < forward_s.size() && k < gather_s.size(); ++k) {
    gathered += gather_s[k];
    pass = std::max(pass, gathered) + forward_s[k];
    compute += forward_s[k];
  }
  return std::max(0.0, pass - compute);
}

double exposed_dp_seconds(std::vector<double> forward_s, std::vector<double> backward_s,
                          const std::vector<double>& bytes, double forward_total_s, double backward_total_s,
                          double reduce_s, double gather_s) {
  double node_fwd = 0, node_bwd = 0, all_bytes = 0;
  for (std::size_t j = 0; j < forward_s.size(); ++j)
    node_fwd += forward_s[j], node_bwd += backward_s[j], all_bytes += bytes[j];
  if (all_bytes <= 0) return reduce_s + gather_s;  // nothing to spread it over: issued at the end of the pass
  std::vector<double> gathers(forward_s.size()), reductions(forward_s.size());
  for (std::size_t j = 0; j < forward_s.size(); ++j) {
    forward_s[j] *= node_fwd > 0 ? forward_total_s / node_fwd : 0.0;
    backward_s[j] *= node_bwd > 0 ? backward_total_s / node_bwd : 0.0;
    gathers[j] = gather_s * bytes[j] / all_bytes;
    reductions[j] = reduce_s * bytes[j] / all_bytes;
  }
  std::reverse(backward_s.begin(), backward_s.end());  // the backward pass runs the nodes last to first
  std::reverse(reductions.begin(), reductions.end());
  return exposed_after_backward(backward_s, reductions) + exposed_before_forward(forward_s, gathers);
}

double bubble_fraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

}  // namespace cohort::planner
