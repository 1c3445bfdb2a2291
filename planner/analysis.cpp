// Model analysis: affine costs from two builds.
#include "planner/analysis.hpp"

namespace cohort::planner {
namespace {

// The longest run of consecutive top-level scopes whose forward operations are the same kinds
// in the same order, as the forward nodes where each begins: a gpt's blocks, without the
// embedding before them or the head after. Empty where no scope repeats: no layers to count.
std::vector<std::size_t> repeated_layers(const graph& x, const std::vector<std::size_t>& boundaries,
                                         std::size_t forward) {
  std::vector<std::size_t> starts{0};
  starts.insert(starts.end(), boundaries.begin(), boundaries.end());
  auto kinds = [&](std::size_t k) {
    const std::size_t end = k + 1 < starts.size() ? starts[k + 1] : forward;
    std::vector<op_kind> out;
    for (std::size_t i = starts[k]; i < end; ++i) out.push_back(x.nodes()[i].kind);
    return out;
  };
  std::size_t best_begin = 0, best_length = 0;
  for (std::size_t k = 0; k < starts.size();) {
    std::size_t j = k + 1;
    const auto first = kinds(k);
    while (j < starts.size() && kinds(j) == first) ++j;
    if (j - k > best_length) best_begin = k, best_length = j - k;
    k = j;
  }
  if (best_length < 2) return {};
  return {starts.begin() + static_cast<std::ptrdiff_t>(best_begin),
          starts.begin() + static_cast<std::ptrdiff_t>(best_begin + best_length)};
}

}  // namespace

result<const axis_completion*> model_analysis::completion(int tp) const {
  auto it = completions_.find(tp);
  if (it != completions_.end()) return it->second.get();
  auto c = complete_axis(*g, "tp", tp);
  if (!c) return c.error();
  auto owned = std::make_unique<axis_completion>(std::move(*c));
  const axis_completion* out = owned.get();
  completions_.emplace(tp, std::move(owned));
  return out;
}

result<std::unique_ptr<model_analysis>> analyze_model(const std::function<var(graph&, std::int64_t)>& model,
                                                      int optimizer_slots, bool sparse_tables) {
  constexpr std::int64_t r1 = 3, r2 = 5;
  auto a = std::make_unique<model_analysis>();
  a->g = std::make_unique<graph>();
  graph other;
  var l1 = model(*a->g, r1);
  var l2 = model(other, r2);
  if (auto st = a->g->check(); !st) return st.error();
  if (auto st = other.check(); !st) return st.error();
  auto g1 = autodiff(*a->g, l1, {.sparse_tables = sparse_tables});
  if (!g1) return g1.error();
  auto g2 = autodiff(other, l2, {.sparse_tables = sparse_tables});
  if (!g2) return g2.error();
  a->grads = *g1;
  const graph& x = *a->g;
  if (x.nodes().size() != other.nodes().size() || x.num_values() != other.num_values())
    return make_error(errc::invalid_argument,
                      "planner: the model's graph changes with the batch size beyond its shapes");
  const double span = static_cast<double>(r2 - r1);
  for (std::size_t i = 0; i < x.nodes().size(); ++i) {
    op_profile p1 = profile_of(x, x.nodes()[i], 1), p2 = profile_of(other, other.nodes()[i], 1);
    affine_cost c;
    c.per_row = {(p2.flops - p1.flops) / span, (p2.bytes - p1.bytes) / span, p1.gemm, p1.attention};
    c.fixed = {p1.flops - c.per_row.flops * r1, p1.bytes - c.per_row.bytes * r1, p1.gemm, p1.attention};
    a->node_cost.push_back(c);
  }
  for (std::size_t v = 0; v < x.num_values(); ++v) {
    double b1 = static_cast<double>(x.value(static_cast<value_id>(v)).type.shape.numel()) * 4.0;
    double b2 = static_cast<double>(other.value(static_cast<value_id>(v)).type.shape.numel()) * 4.0;
    double per_row = (b2 - b1) / span;
    a->value_bytes_per_row.push_back(per_row);
    a->value_bytes_fixed.push_back(b1 - per_row * r1);
  }
  const std::size_t forward = a->grads.backward_begin;
  for (std::size_t i = 0; i < x.nodes().size(); ++i) {
    std::int32_t origin = x.nodes()[i].origin;
    a->owner.push_back(i < forward ? static_cast<int>(i) : (origin >= 0 ? origin : static_cast<int>(forward) - 1));
  }
  a->param_bytes_of_forward.assign(forward, 0.0);
  std::vector<bool> seen(x.num_values(), false);
  for (std::size_t i = 0; i < forward; ++i)
    for (auto v : x.nodes()[i].inputs)
      if (x.value(v).kind == value_kind::parameter && !seen[static_cast<std::size_t>(v)]) {
        seen[static_cast<std::size_t>(v)] = true;
        double bytes = static_cast<double>(x.value(v).type.shape.numel()) * 4.0;
        a->param_bytes_of_forward[i] += bytes;
        a->param_bytes += bytes;
      }
  for (std::size_t i = 0; i < forward; ++i)
    if (x.nodes()[i].kind == op_kind::embedding_bag) a->lookups_end = i + 1;
  auto top_scope = [](const std::string& s) { return s.substr(0, s.find('.')); };
  for (std::size_t i = 1; i < forward; ++i)
    if (top_scope(x.nodes()[i].scope) != top_scope(x.nodes()[i - 1].scope)) a->boundaries.push_back(i);
  a->layer_starts = repeated_layers(x, a->boundaries, forward);
  // A value produced by forward node p and last read by forward node l crosses every cut j
  // with p < j <= l: a difference array over j.
  std::vector<std::size_t> last_read(x.num_values(), 0);
  for (std::size_t i = 0; i < forward; ++i)
    for (auto v : x.nodes()[i].inputs) last_read[static_cast<std::size_t>(v)] = i;
  std::vector<double> fixed_delta(forward + 2, 0.0), row_delta(forward + 2, 0.0);
  for (std::size_t v = 0; v < x.num_values(); ++v) {
    auto p = x.value(static_cast<value_id>(v)).producer;
    if (p < 0 || static_cast<std::size_t>(p) >= forward || last_read[v] <= static_cast<std::size_t>(p)) continue;
    fixed_delta[static_cast<std::size_t>(p) + 1] += a->value_bytes_fixed[v];
    fixed_delta[last_read[v] + 1] -= a->value_bytes_fixed[v];
    row_delta[static_cast<std::size_t>(p) + 1] += a->value_bytes_per_row[v];
    row_delta[last_read[v] + 1] -= a->value_bytes_per_row[v];
  }
  double fixed = 0, per_row = 0;
  for (std::size_t j = 0; j <= forward; ++j) {
    fixed += fixed_delta[j];
    per_row += row_delta[j];
    a->cut_bytes_fixed.push_back(fixed);
    a->cut_bytes_per_row.push_back(per_row);
  }
  a->optimizer_slots = optimizer_slots;
  return a;
}

}  // namespace cohort::planner
