// Straggler detection from the step sums' seconds per rank, and the move that relieves one.
#include "actors/straggler_watch.hpp"

#include <algorithm>

namespace cohort::actors {
namespace {

std::vector<int> ranks_per_process(const std::vector<int>& owner, std::size_t processes) {
  std::vector<int> n(processes, 0);
  for (int p : owner)
    if (p >= 0 && static_cast<std::size_t>(p) < processes) ++n[static_cast<std::size_t>(p)];
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

void straggler_watch::observe(const std::vector<double>& per_rank_s, const std::vector<int>& owner) {
  const auto n = ranks_per_process(owner, per_rank_s.size());
  counts_.resize(per_rank_s.size(), 0);
  for (std::size_t p = 0; p < per_rank_s.size(); ++p) {
    std::vector<double> others;
    for (std::size_t q = 0; q < per_rank_s.size(); ++q)
      if (q != p && n[q] > 0 && per_rank_s[q] > 0) others.push_back(per_rank_s[q]);
    const bool slow = s_.factor > 0 && n[p] > 0 && !others.empty() && per_rank_s[p] > s_.factor * median(others);
    counts_[p] = slow ? counts_[p] + 1 : 0;
  }
}

int straggler_watch::straggler() const {
  int worst = -1;
  for (std::size_t p = 0; p < counts_.size(); ++p)
    if (counts_[p] >= s_.steps && (worst < 0 || counts_[p] > counts_[static_cast<std::size_t>(worst)]))
      worst = static_cast<int>(p);
  return worst;
}

bool move_check::made_it_worse() const { return after_s.size() >= steps && median(after_s) > before_s * (1 + margin); }

std::string rank_move::describe() const {
  return "rank " + std::to_string(rank) + ": process " + std::to_string(from) + " -> process " + std::to_string(to);
}

std::optional<rank_move> best_move(const std::vector<double>& per_rank_s, const std::vector<int>& owner, int from,
                                   int cores) {
  const auto n = ranks_per_process(owner, per_rank_s.size());
  if (from < 0 || static_cast<std::size_t>(from) >= n.size() || n[static_cast<std::size_t>(from)] < 2)
    return std::nullopt;
  auto busiest = [&](const std::vector<int>& counts) {
    double worst = 0;
    for (std::size_t p = 0; p < counts.size(); ++p)
      worst = std::max(worst, std::max(1.0, static_cast<double>(counts[p]) / std::max(1, cores)) * per_rank_s[p]);
    return worst;
  };
  const double before = busiest(n);
  std::optional<rank_move> best;
  for (std::size_t to = 0; to < n.size(); ++to) {
    if (static_cast<int>(to) == from || n[to] == 0 || per_rank_s[to] <= 0) continue;  // only processes in the plan
    auto after = n;
    --after[static_cast<std::size_t>(from)];
    ++after[to];
    const double t = busiest(after);
    if (t < before && (!best || t < best->predicted_after_s)) {
      best = rank_move{};
      best->from = from;
      best->to = static_cast<int>(to);
      best->predicted_before_s = before;
      best->predicted_after_s = t;
    }
  }
  if (!best) return std::nullopt;
  for (std::size_t r = owner.size(); r-- > 0;)  // its last rank (a pipeline's later stage, a later replica)
    if (owner[r] == from) {
      best->rank = static_cast<int>(r);
      break;
    }
  return best;
}

}  // namespace cohort::actors
