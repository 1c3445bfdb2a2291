// Reshard planning by box intersection.
#include "graph/reshard.hpp"

#include <algorithm>

namespace cohort {

bool box::empty() const {
  return std::any_of(dims.begin(), dims.end(), [](const range& r) { return r.size() <= 0; });
}

shape box::extent() const {
  std::vector<std::int64_t> e;
  for (const auto& r : dims) e.push_back(r.size());
  return shape(std::move(e));
}

box local_box(const shape& global, const layout& l, int mesh_rank) {
  box b;
  for (int d = 0; d < global.rank(); ++d) b.dims.push_back({0, global[d]});
  auto coords = l.mesh.coordinates(mesh_rank);
  for (int a = 0; a < l.mesh.axis_count(); ++a) {
    const shard* s = as_shard(l.placements[static_cast<std::size_t>(a)]);
    if (s == nullptr) continue;
    range& r = b.dims[static_cast<std::size_t>(s->dim)];
    // a later axis shards what the earlier ones left (nested splits, as a mesh does)
    range sub = shard_part(*s, r.size(), l.mesh.axis_size(a), coords[static_cast<std::size_t>(a)]);
    r = {r.begin + sub.begin, r.begin + sub.end};
  }
  return b;
}

bool contributes(const layout& l, int mesh_rank) {
  auto coords = l.mesh.coordinates(mesh_rank);
  for (int a = 0; a < l.mesh.axis_count(); ++a)
    if (is_replicate(l.placements[static_cast<std::size_t>(a)]) && coords[static_cast<std::size_t>(a)] != 0)
      return false;
  return true;
}

bool holds_partial_value(const layout& l, int mesh_rank) {
  auto coords = l.mesh.coordinates(mesh_rank);
  for (int a = 0; a < l.mesh.axis_count(); ++a)
    if (is_partial(l.placements[static_cast<std::size_t>(a)]) && coords[static_cast<std::size_t>(a)] != 0) return false;
  return true;
}

namespace {

status check(const shape& global, const layout& l, const char* which) {
  if (static_cast<int>(l.placements.size()) != l.mesh.axis_count())
    return make_error(errc::invalid_argument, std::string("reshard: ") + which + " layout has " +
                                                  std::to_string(l.placements.size()) + " placements for mesh " +
                                                  l.mesh.to_string());
  if (!l.ranks.empty() && static_cast<int>(l.ranks.size()) != l.mesh.rank_count())
    return make_error(errc::invalid_argument, std::string("reshard: ") + which + " layout names " +
                                                  std::to_string(l.ranks.size()) + " ranks for " +
                                                  std::to_string(l.mesh.rank_count()) + " positions");
  for (const auto& p : l.placements)
    if (const shard* s = as_shard(p); s != nullptr && (s->dim < 0 || s->dim >= global.rank()))
      return make_error(errc::invalid_argument, std::string("reshard: ") + which + " shards dimension " +
                                                    std::to_string(s->dim) + " of " + global.to_string());
  return {};
}

}  // namespace

result<reshard_plan> plan_reshard(const shape& global, const layout& from, const layout& to) {
  if (auto st = check(global, from, "source"); !st) return st.error();
  if (auto st = check(global, to, "destination"); !st) return st.error();
  reshard_plan plan{global, from, to, {}};
  bool source_partial =
      std::any_of(from.placements.begin(), from.placements.end(), [](const placement& p) { return is_partial(p); });
  for (int d = 0; d < to.mesh.rank_count(); ++d) {
    if (!holds_partial_value(to, d)) continue;  // zeros: nothing arrives
    box want = local_box(global, to, d);
    for (int s = 0; s < from.mesh.rank_count(); ++s) {
      if (!contributes(from, s)) continue;
      box have = local_box(global, from, s);
      reshard_message m;
      m.from = from.global_rank(s);
      m.to = to.global_rank(d);
      m.add = source_partial;
      for (std::size_t k = 0; k < want.dims.size(); ++k) {
        std::int64_t b = std::max(want.dims[k].begin, have.dims[k].begin);
        std::int64_t e = std::min(want.dims[k].end, have.dims[k].end);
        m.from_box.dims.push_back({b - have.dims[k].begin, e - have.dims[k].begin});
        m.to_box.dims.push_back({b - want.dims[k].begin, e - want.dims[k].begin});
      }
      if (!m.from_box.empty()) plan.messages.push_back(std::move(m));
    }
  }
  return plan;
}

}  // namespace cohort
