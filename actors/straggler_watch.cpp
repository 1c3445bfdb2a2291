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
  std::vector<double> step(per_rank_s.size(), 0);  // 0: without ranks this step (nobody's peer)
  for (std::size_t p = 0; p < per_rank_s.size(); ++p) step[p] = n[p] > 0 ? per_rank_s[p] : 0;
  window_.push_back(std::move(step));
  if (window_.size() > static_cast<std::size_t>(std::max(1, s_.steps))) window_.erase(window_.begin());
}

std::vector<double> straggler_watch::pace() const {
  const std::size_t processes = window_.empty() ? 0 : window_.back().size();
  std::vector<double> pace(processes, 0);
  for (std::size_t p = 0; p < processes; ++p) {
    std::vector<double> seen;
    for (const auto& step : window_)
      if (p < step.size() && step[p] > 0) seen.push_back(step[p]);
    if (seen.size() == window_.size()) pace[p] = median(seen);
  }
  return pace;
}

int straggler_watch::straggler() const {
  if (s_.factor <= 0 || window_.size() < static_cast<std::size_t>(std::max(1, s_.steps))) return -1;
  const auto pace = this->pace();
  const std::size_t processes = pace.size();
  int worst = -1;
  for (std::size_t p = 0; p < processes; ++p) {
    std::vector<double> others;
    for (std::size_t q = 0; q < processes; ++q)
      if (q != p && pace[q] > 0) others.push_back(pace[q]);
    const bool slow = pace[p] > 0 && !others.empty() && pace[p] > s_.factor * median(others);
    if (slow && (worst < 0 || pace[p] > pace[static_cast<std::size_t>(worst)])) worst = static_cast<int>(p);
  }
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
