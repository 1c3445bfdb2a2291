// Discrete-event simulation of one pipeline step, in time order, with processor sharing.
#include "planner/simulator.hpp"

#include <algorithm>
#include <limits>

namespace cohort::planner {

simulation simulate_step(int stages, int micro_batches, const std::vector<stage_timing>& timing,
                         const std::function<int(int)>& buffer_size, const core_sharing& sharing) {
  return simulate_step(stages, 1, micro_batches, timing, buffer_size, sharing);
}

simulation simulate_step(int ranks, int chunks, int micro_batches, const std::vector<stage_timing>& timing,
                         const std::function<int(int)>& credit, const core_sharing& sharing) {
  const auto p = static_cast<std::size_t>(ranks);
  const auto m = static_cast<std::size_t>(micro_batches);
  const std::size_t stages = p * static_cast<std::size_t>(chunks);
  const double inf = std::numeric_limits<double>::infinity();
  auto order = build_schedule(ranks, chunks, micro_batches, credit);
  if (order.empty() || timing.size() != stages) return {};  // validate's rules prevent both
  std::vector<std::vector<double>> f_end(stages, std::vector<double>(m, inf)),
      b_end(stages, std::vector<double>(m, inf));
  std::vector<std::size_t> next(p, 0);
  std::vector<bool> running(p, false);
  std::vector<double> remaining(p, 0.0), duration(p, 0.0), busy(p, 0.0), pipeline_end(p, 0.0), free_at(p, 0.0),
      started(p, 0.0);
  std::vector<std::array<double, 3>> wall(p, std::array<double, 3>{});
  double now = 0;

  // When rank r's next task may start (inf: an input is not produced yet), and how long it
  // takes: its chunk's stage is chunk * ranks + r; the update is every chunk's at once.
  auto stage_of = [&](std::size_t r) { return static_cast<std::size_t>(std::max(order[r][next[r]].chunk, 0)) * p + r; };
  auto ready_time = [&](std::size_t r) -> double {
    const task& t = order[r][next[r]];
    const auto i = static_cast<std::size_t>(std::max(t.micro_batch, 0));
    const std::size_t s = stage_of(r);
    if (t.kind == task_kind::forward)
      return s == 0 ? free_at[r] : std::max(free_at[r], f_end[s - 1][i] + timing[s - 1].send_forward_s);
    if (t.kind == task_kind::backward) {
      if (s + 1 < stages) return std::max(free_at[r], b_end[s + 1][i] + timing[s + 1].send_backward_s);
      return std::max(free_at[r], f_end[s][i]);
    }
    return free_at[r];
  };
  auto length = [&](std::size_t r) {
    const task& t = order[r][next[r]];
    if (t.kind == task_kind::forward) return timing[stage_of(r)].forward_s;
    if (t.kind == task_kind::backward) return timing[stage_of(r)].backward_s;
    double update = 0;
    for (std::size_t s = r; s < stages; s += p) update += timing[s].update_s;
    return update;
  };

  simulation out;
  if (sharing.cores <= 0 || sharing.cores >= static_cast<double>(p) * sharing.ranks_per_stage) {
    // No core shared: every task runs at full speed from the moment its input has arrived and
    // its rank is free, so each task's times follow from those before it — the step is the
    // longest path through the task orders, computed task by task (in sweeps over the ranks,
    // up and then down, as activations flow up and gradients down) instead of event by event.
    std::size_t left = 0;
    for (const auto& o : order) left += o.size();
    for (bool upward = true; left > 0; upward = !upward) {
      bool progressed = false;
      for (std::size_t k = 0; k < p; ++k) {
        const std::size_t r = upward ? k : p - 1 - k;
        for (; next[r] < order[r].size(); ++next[r], --left, progressed = true) {
          const double start = ready_time(r);
          if (start == inf) break;  // its input comes from a task not played yet
          const task& t = order[r][next[r]];
          const double took = length(r);
          const auto i = static_cast<std::size_t>(std::max(t.micro_batch, 0));
          if (t.kind == task_kind::forward) f_end[stage_of(r)][i] = start + took;
          if (t.kind == task_kind::backward) b_end[stage_of(r)][i] = start + took;
          if (t.kind == task_kind::update)
            pipeline_end[r] = start;
          else
            busy[r] += took;
          wall[r][static_cast<std::size_t>(t.kind)] += took;
          free_at[r] = start + took;
        }
      }
      if (!progressed) return {};  // a cycle: cannot happen with an order build_schedule gives
    }
  }
  for (;;) {
    // start every task whose inputs have arrived
    double next_arrival = inf;
    bool any_left = false;
    for (std::size_t s = 0; s < p; ++s) {
      if (running[s] || next[s] >= order[s].size()) continue;
      any_left = true;
      double r = ready_time(s);
      if (r <= now) {
        running[s] = true;
        started[s] = now;
        duration[s] = remaining[s] = length(s);
        if (order[s][next[s]].kind == task_kind::update) pipeline_end[s] = now;
      } else {
        next_arrival = std::min(next_arrival, r);
      }
    }
    std::size_t active = 0;
    for (std::size_t s = 0; s < p; ++s) active += running[s] ? 1 : 0;
    if (active == 0) {
      if (!any_left || next_arrival == inf) break;  // done (inf: cannot happen with a valid order)
      now = next_arrival;
      continue;
    }
    const double busy_ranks = static_cast<double>(active) * sharing.ranks_per_stage;
    const double rate = sharing.cores > 0 ? std::min(1.0, sharing.cores / busy_ranks) : 1.0;
    double dt = next_arrival - now;
    for (std::size_t s = 0; s < p; ++s)
      if (running[s]) dt = std::min(dt, remaining[s] / rate);
    now += dt;
    for (std::size_t s = 0; s < p; ++s) {
      if (!running[s]) continue;
      remaining[s] -= dt * rate;
      if (remaining[s] > 1e-12 * std::max(1.0, duration[s])) continue;
      const task& t = order[s][next[s]];
      const auto i = static_cast<std::size_t>(std::max(t.micro_batch, 0));
      if (t.kind == task_kind::forward) f_end[stage_of(s)][i] = now;
      if (t.kind == task_kind::backward) b_end[stage_of(s)][i] = now;
      if (t.kind != task_kind::update) busy[s] += duration[s];
      wall[s][static_cast<std::size_t>(t.kind)] += now - started[s];
      free_at[s] = now;
      running[s] = false;
      ++next[s];
    }
  }
  out.busy_s = busy;
  out.task_wall_s = wall;
  out.step_s = *std::max_element(free_at.begin(), free_at.end());
  double span = *std::max_element(pipeline_end.begin(), pipeline_end.end());
  double busiest = *std::max_element(busy.begin(), busy.end());
  out.bubble = span > 0 ? 1.0 - busiest / span : 0.0;
  return out;
}

}  // namespace cohort::planner
