// The credit rule, simulated round by round.
#include "planner/schedule.hpp"

#include <algorithm>

namespace cohort::planner {

std::string to_string(const task& t) {
  switch (t.kind) {
    case task_kind::forward:
      return "F" + std::to_string(t.micro_batch) + (t.chunk > 0 ? "." + std::to_string(t.chunk) : "");
    case task_kind::backward:
      return "B" + std::to_string(t.micro_batch) + (t.chunk > 0 ? "." + std::to_string(t.chunk) : "");
    case task_kind::update:
      return "U";
  }
  return "?";
}

std::string to_string(const std::vector<task>& order) {
  std::string out;
  for (const auto& t : order) {
    if (!out.empty()) out += ' ';
    out += to_string(t);
  }
  return out;
}

std::vector<std::vector<task>> build_schedule(int ranks, int chunks, int micro_batches,
                                              const std::function<int(int)>& credit) {
  if (chunks == 1) return build_schedule(ranks, micro_batches, credit);
  const auto p = static_cast<std::size_t>(ranks), v = static_cast<std::size_t>(chunks),
             m = static_cast<std::size_t>(micro_batches);
  const std::size_t stages = p * v, tasks = m * v;
  // each rank's forward and backward sequences: groups of p micro-batches, chunk by chunk
  std::vector<task> forwards, backwards;
  for (std::size_t first = 0; first < m; first += p)
    for (std::size_t k = 0; k < v; ++k)
      for (std::size_t i = first; i < std::min(m, first + p); ++i) {
        forwards.push_back({task_kind::forward, static_cast<int>(i), static_cast<int>(k)});
        backwards.push_back({task_kind::backward, static_cast<int>(i), static_cast<int>(v - 1 - k)});
      }
  constexpr int never = -1;
  std::vector<std::vector<int>> done_f(stages, std::vector<int>(m, never)), done_b(stages, std::vector<int>(m, never));
  auto done_before = [&](const std::vector<std::vector<int>>& done, std::size_t stage, std::size_t mb, int round) {
    return done[stage][mb] != never && done[stage][mb] < round;
  };
  std::vector<std::size_t> next_f(p, 0), next_b(p, 0);
  std::vector<std::vector<task>> order(p);
  std::size_t finished = 0;
  for (int round = 0; finished < p; ++round) {
    bool progress = false;
    for (std::size_t r = 0; r < p; ++r) {
      if (next_b[r] == tasks) continue;
      const std::size_t in_flight = next_f[r] - next_b[r];
      bool f_ready = false, b_ready = false;
      if (next_f[r] < tasks) {
        const task& f = forwards[next_f[r]];
        const std::size_t s = static_cast<std::size_t>(f.chunk) * p + r, i = static_cast<std::size_t>(f.micro_batch);
        f_ready = (s == 0 || done_before(done_f, s - 1, i, round)) &&
                  in_flight < static_cast<std::size_t>(std::max(1, credit(static_cast<int>(r))));
      }
      if (next_b[r] < next_f[r]) {
        const task& b = backwards[next_b[r]];
        const std::size_t s = static_cast<std::size_t>(b.chunk) * p + r, i = static_cast<std::size_t>(b.micro_batch);
        b_ready = s + 1 == stages ? done_before(done_f, s, i, round) : done_before(done_b, s + 1, i, round);
      }
      if (!f_ready && !b_ready) continue;
      progress = true;
      const task t = f_ready ? forwards[next_f[r]++] : backwards[next_b[r]++];
      const std::size_t s = static_cast<std::size_t>(t.chunk) * p + r, i = static_cast<std::size_t>(t.micro_batch);
      (f_ready ? done_f : done_b)[s][i] = round;
      order[r].push_back(t);
      if (next_b[r] == tasks) {
        order[r].push_back({task_kind::update, -1});
        ++finished;
      }
    }
    if (!progress) return {};  // stalled: a credit too small for the chunks
  }
  return order;
}

int most_in_flight(const std::vector<task>& order, int chunk) {
  int in_flight = 0, most = 0;
  for (const task& t : order) {
    if (t.chunk != chunk) continue;
    if (t.kind == task_kind::forward) most = std::max(most, ++in_flight);
    if (t.kind == task_kind::backward) --in_flight;
  }
  return most;
}

int slots_needed(const std::vector<task>& order) { return std::max(most_in_flight(order, 0), 1); }

std::vector<std::vector<task>> build_schedule(int stages, int micro_batches,
                                              const std::function<int(int)>& buffer_size) {
  const auto p = static_cast<std::size_t>(stages);
  const auto m = static_cast<std::size_t>(micro_batches);
  // done_f[s][i] / done_b[s][i]: the round after which the task's output is visible.
  constexpr int never = -1;
  std::vector<std::vector<int>> done_f(p, std::vector<int>(m, never)), done_b(p, std::vector<int>(m, never));
  std::vector<std::size_t> next_f(p, 0), next_b(p, 0);
  std::vector<std::vector<task>> order(p);
  std::size_t finished = 0;
  for (int round = 0; finished < p; ++round) {
    for (std::size_t s = 0; s < p; ++s) {
      if (next_b[s] == m) continue;
      std::size_t in_flight = next_f[s] - next_b[s];
      bool f_input =
          next_f[s] < m && (s == 0 || (done_f[s - 1][next_f[s]] != never && done_f[s - 1][next_f[s]] < round));
      bool f_room = in_flight < static_cast<std::size_t>(std::max(1, buffer_size(static_cast<int>(s))));
      bool b_input =
          next_b[s] < next_f[s] && (s + 1 == p ? done_f[s][next_b[s]] < round
                                               : done_b[s + 1][next_b[s]] != never && done_b[s + 1][next_b[s]] < round);
      if (f_input && f_room) {
        done_f[s][next_f[s]] = round;
        order[s].push_back({task_kind::forward, static_cast<int>(next_f[s]++)});
      } else if (b_input) {
        done_b[s][next_b[s]] = round;
        order[s].push_back({task_kind::backward, static_cast<int>(next_b[s]++)});
        if (next_b[s] == m) {
          order[s].push_back({task_kind::update, -1});
          ++finished;
        }
      }
    }
  }
  return order;
}

}  // namespace cohort::planner
