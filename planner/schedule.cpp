// The credit rule, simulated round by round.
#include "planner/schedule.hpp"

#include <algorithm>

namespace cohort::planner {

std::string to_string(const task& t) {
  switch (t.kind) {
    case task_kind::forward:
      return "F" + std::to_string(t.micro_batch);
    case task_kind::backward:
      return "B" + std::to_string(t.micro_batch);
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
