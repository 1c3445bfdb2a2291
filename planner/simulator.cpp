// Discrete-event simulation of one pipeline step.
#include "planner/simulator.hpp"

#include <algorithm>
#include <limits>

namespace cohort::planner {

simulation simulate_step(int stages, int micro_batches, const std::vector<stage_timing>& timing,
                         const std::function<int(int)>& buffer_size) {
  const auto p = static_cast<std::size_t>(stages);
  const auto m = static_cast<std::size_t>(micro_batches);
  auto order = build_schedule(stages, micro_batches, buffer_size);
  constexpr double unknown = -1;
  std::vector<std::vector<double>> f_end(p, std::vector<double>(m, unknown)), b_end(p, std::vector<double>(m, unknown));
  std::vector<double> free_at(p, 0.0), busy(p, 0.0), pipeline_end(p, 0.0);
  std::vector<std::size_t> next(p, 0);
  // Advance every stage as far as its next task's inputs allow; repeat until all are done.
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (std::size_t s = 0; s < p; ++s) {
      while (next[s] < order[s].size()) {
        const task& t = order[s][next[s]];
        const auto i = static_cast<std::size_t>(std::max(t.micro_batch, 0));
        double ready = free_at[s];
        double duration = 0;
        if (t.kind == task_kind::forward) {
          if (s > 0) {
            if (f_end[s - 1][i] == unknown) break;
            ready = std::max(ready, f_end[s - 1][i] + timing[s - 1].send_forward_s);
          }
          duration = timing[s].forward_s;
        } else if (t.kind == task_kind::backward) {
          if (s + 1 < p) {
            if (b_end[s + 1][i] == unknown) break;
            ready = std::max(ready, b_end[s + 1][i] + timing[s + 1].send_backward_s);
          } else if (f_end[s][i] == unknown) {
            break;
          }
          duration = timing[s].backward_s;
        } else {
          duration = timing[s].update_s;
          pipeline_end[s] = ready;
        }
        double end = ready + duration;
        if (t.kind == task_kind::forward) f_end[s][i] = end;
        if (t.kind == task_kind::backward) b_end[s][i] = end;
        if (t.kind != task_kind::update) busy[s] += duration;
        free_at[s] = end;
        ++next[s];
        progressed = true;
      }
    }
  }
  simulation out;
  out.busy_s = busy;
  out.step_s = *std::max_element(free_at.begin(), free_at.end());
  double span = *std::max_element(pipeline_end.begin(), pipeline_end.end());
  double busiest = *std::max_element(busy.begin(), busy.end());
  out.bubble = span > 0 ? 1.0 - busiest / span : 0.0;
  return out;
}

}  // namespace cohort::planner
