// Piece layouts of a compiled plan and the state transfer between two of them.
#include "actors/state_layout.hpp"

#include <algorithm>
#include <map>

#include "actors/worker_step.hpp"
#include "planner/rank_layout.hpp"

namespace cohort::actors {

result<std::vector<piece_layout>> piece_layouts(const compiled_model& cm) {
  const auto& plan = cm.plan;
  const planner::rank_layout layout(plan);
  std::vector<piece_layout> out(static_cast<std::size_t>(plan.ranks()));
  for (int s = 0; s < plan.pp; ++s)
    for (int t = 0; t < plan.tp; ++t) {
      auto prog = cm.program(s, t);
      if (!prog) return prog.error();
      // each parameter's range of the stage's flat buffer (stage_worker's order) and its tp box
      struct placed {
        std::string name;
        shape whole;
        runs elements;
        range flat;
        bool sharded;
      };
      std::vector<placed> params;
      std::int64_t total = 0;
      for (const auto& prm : prog->params) {
        const shape& local = prog->g.value(prm.local).type.shape;
        const shape& whole = cm.serial->value(cm.serial->find(prm.name)).type.shape;
        std::vector<range> box;
        for (int d = 0; d < whole.rank(); ++d) box.push_back({0, whole[d]});
        if (const shard* sh = as_shard(prm.tp))
          box[static_cast<std::size_t>(sh->dim)] = shard_part(*sh, whole[sh->dim], plan.tp, t);
        params.push_back(
            {prm.name, whole, box_runs(whole, box), {total, total + local.numel()}, as_shard(prm.tp) != nullptr});
        total += local.numel();
      }
      for (int d = 0; d < plan.dp; ++d) {
        const int rank = layout.rank_of({d, s, t});
        piece_layout& p = out[static_cast<std::size_t>(rank)];
        const range mine = owned_piece(plan, total, d);
        p.rank = rank;
        p.size = mine.size();
        p.primary = plan.shard_params || d == 0;
        for (const auto& prm : params) {
          const std::int64_t lo = std::max(mine.begin, prm.flat.begin), hi = std::min(mine.end, prm.flat.end);
          if (lo >= hi) continue;
          p.parts.push_back({prm.name, prm.whole, sub_runs(prm.elements, lo - prm.flat.begin, hi - lo), lo - mine.begin,
                             p.primary && (prm.sharded || t == 0)});
        }
      }
    }
  return out;
}

result<std::vector<state_copy>> plan_state_transfer(const std::vector<piece_layout>& from,
                                                    const std::vector<piece_layout>& to) {
  std::map<std::string, std::vector<std::pair<int, const param_part*>>> sources;
  for (const auto& p : from)
    for (const auto& part : p.parts)
      if (part.source) sources[part.name].push_back({p.rank, &part});
  std::vector<state_copy> copies;
  for (const auto& p : to)
    for (const auto& part : p.parts) {
      auto it = sources.find(part.name);
      if (it == sources.end())
        return make_error(errc::invalid_argument, "state transfer: the old plan has no parameter '" + part.name + "'");
      std::int64_t covered = 0;
      for (const auto& [rank, src] : it->second) {
        if (src->whole != part.whole)
          return make_error(errc::shape_mismatch, "state transfer: parameter '" + part.name + "' is " +
                                                      src->whole.to_string() + " in the old plan and " +
                                                      part.whole.to_string() + " in the new");
        for (const auto& c : overlap(src->elements, part.elements)) {
          copies.push_back({rank, p.rank, src->offset + c.from, part.offset + c.to, c.count});
          covered += c.count;
        }
      }
      if (covered != run_elements(part.elements))
        return make_error(errc::invalid_argument, "state transfer: the old plan holds " + std::to_string(covered) +
                                                      " of the " + std::to_string(run_elements(part.elements)) +
                                                      " elements of '" + part.name + "' that rank " +
                                                      std::to_string(p.rank) + " needs");
    }
  return copies;
}

bool same_elements(const piece_layout& a, const piece_layout& b) {
  if (a.size != b.size || a.parts.size() != b.parts.size()) return false;
  for (std::size_t i = 0; i < a.parts.size(); ++i) {
    const param_part &x = a.parts[i], &y = b.parts[i];
    if (x.name != y.name || x.whole != y.whole || x.offset != y.offset || x.elements != y.elements) return false;
  }
  return true;
}

std::vector<int> kept_pieces(const std::vector<piece_layout>& from, const std::vector<piece_layout>& to,
                             const std::vector<int>& old_owner, const std::vector<int>& new_owner) {
  std::vector<int> kept(to.size(), -1);
  std::vector<bool> taken(from.size(), false);
  auto fits = [&](std::size_t o, std::size_t n) {
    return !taken[o] && o < old_owner.size() && n < new_owner.size() && old_owner[o] == new_owner[n] &&
           same_elements(from[o], to[n]);
  };
  for (std::size_t n = 0; n < to.size() && n < from.size(); ++n)  // its own number first
    if (fits(n, n)) kept[n] = static_cast<int>(n), taken[n] = true;
  for (std::size_t n = 0; n < to.size(); ++n)
    for (std::size_t o = 0; o < from.size() && kept[n] < 0; ++o)
      if (fits(o, n)) kept[n] = static_cast<int>(o), taken[o] = true;
  return kept;
}

std::vector<state_copy> without_kept(const std::vector<state_copy>& copies, const std::vector<int>& kept) {
  std::vector<state_copy> out;
  for (const auto& c : copies)
    if (static_cast<std::size_t>(c.to_rank) >= kept.size() || kept[static_cast<std::size_t>(c.to_rank)] < 0)
      out.push_back(c);
  return out;
}

piece_state empty_piece(std::int64_t size, std::size_t slots, std::int64_t steps) {
  piece_state p;
  p.values = tensor::zeros({size});
  for (std::size_t k = 0; k < slots; ++k) p.slots.push_back(tensor::zeros({size}));
  p.steps = steps;
  return p;
}

void apply_copy(const state_copy& c, const piece_state& src, piece_state& dst, std::size_t slots) {
  std::copy_n(src.values.data<float>() + c.from, c.count, dst.values.data<float>() + c.to);
  for (std::size_t k = 0; k < slots; ++k)
    std::copy_n(src.slots[k].data<float>() + c.from, c.count, dst.slots[k].data<float>() + c.to);
}

std::vector<piece_state> apply_state_transfer(const std::vector<state_copy>& copies,
                                              const std::vector<piece_state>& old, const std::vector<piece_layout>& to,
                                              std::size_t slots, std::int64_t steps, const std::vector<int>& kept) {
  std::vector<piece_state> out;
  for (std::size_t r = 0; r < to.size(); ++r)
    out.push_back(r < kept.size() && kept[r] >= 0 ? piece_state{} : empty_piece(to[r].size, slots, steps));
  for (const auto& c : copies)
    apply_copy(c, old[static_cast<std::size_t>(c.from_rank)], out[static_cast<std::size_t>(c.to_rank)], slots);
  return out;
}

double transfer_bytes(const std::vector<state_copy>& copies, std::size_t slots) {
  double elements = 0;
  for (const auto& c : copies) elements += static_cast<double>(c.count);
  return elements * 4.0 * static_cast<double>(1 + slots);
}

}  // namespace cohort::actors
