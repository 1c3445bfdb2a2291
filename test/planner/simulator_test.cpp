// The discrete-event simulator against the closed forms of a synchronous pipeline: with
// equal stages, forward f and backward b per micro-batch, one step takes (m + p - 1)(f + b)
// under GPipe and 1F1B alike, and the idle fraction is (p - 1) / (m + p - 1).
#include <doctest/doctest.h>

#include "planner/cost_model.hpp"
#include "planner/simulator.hpp"

using namespace cohort::planner;

namespace {
auto one_f_one_b(int p) {
  return [p](int s) { return p - s; };
}
}  // namespace

TEST_CASE("equal stages: step time and bubble match (m + p - 1)(f + b) and (p - 1)/(m + p - 1)") {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 8, 16}) {
      CAPTURE(p);
      CAPTURE(m);
      std::vector<stage_timing> t(static_cast<std::size_t>(p), stage_timing{.forward_s = 1.0, .backward_s = 2.0});
      auto r = simulate_step(p, m, t, one_f_one_b(p));
      CHECK(r.step_s == doctest::Approx((m + p - 1) * 3.0));
      CHECK(r.bubble == doctest::Approx(bubble_fraction(p, m)));
      auto gpipe = simulate_step(p, m, t, [m](int) { return m; });
      CHECK(gpipe.step_s == doctest::Approx((m + p - 1) * 3.0));
      for (double busy : r.busy_s) CHECK(busy == doctest::Approx(m * 3.0));
    }
}

TEST_CASE("the update runs after the last backward, transfers delay the stages that wait for them") {
  std::vector<stage_timing> t(2, stage_timing{.forward_s = 1.0, .backward_s = 2.0, .update_s = 0.5});
  CHECK(simulate_step(2, 4, t, one_f_one_b(2)).step_s == doctest::Approx(5 * 3.0 + 0.5));
  // one stage, one micro-batch: f + b + u
  std::vector<stage_timing> one(1, stage_timing{.forward_s = 1.0, .backward_s = 2.0, .update_s = 0.25});
  CHECK(simulate_step(1, 1, one, one_f_one_b(1)).step_s == doctest::Approx(3.25));
  // two stages, one micro-batch, a transfer of 0.1 each way: F0 .1 F1 B1 .1 B0
  std::vector<stage_timing> sends(
      2, stage_timing{.forward_s = 1.0, .backward_s = 2.0, .send_forward_s = 0.1, .send_backward_s = 0.1});
  CHECK(simulate_step(2, 1, sends, one_f_one_b(2)).step_s == doctest::Approx(1 + 0.1 + 1 + 2 + 0.1 + 2));
}

TEST_CASE("an uneven pipeline moves at its slowest stage") {
  std::vector<stage_timing> t{
      {.forward_s = 1, .backward_s = 2}, {.forward_s = 3, .backward_s = 6}, {.forward_s = 1, .backward_s = 2}};
  auto r = simulate_step(3, 16, t, one_f_one_b(3));
  // the slow stage is busy 16 * 9; before it starts the first forward of stage 0 (1), after its
  // last backward the backward of stage 0 (2)
  CHECK(r.step_s >= 16 * 9.0 + 1 + 2 - 1e-9);
  CHECK(r.step_s <= 16 * 9.0 + 1 + 2 + 9 + 1e-9);
  CHECK(r.busy_s[1] == doctest::Approx(16 * 9.0));
}

TEST_CASE("GPipe and 1F1B end together on equal stages, 1F1B keeps fewer micro-batches in flight") {
  // the simulator does not track memory; the order it plays does: under 1F1B stage 0 never
  // has more than p micro-batches forwarded and not yet backwarded
  auto order = build_schedule(4, 8, one_f_one_b(4));
  int in_flight = 0, most = 0;
  for (const task& t : order[0]) {
    if (t.kind == task_kind::forward) most = std::max(most, ++in_flight);
    if (t.kind == task_kind::backward) --in_flight;
  }
  CHECK(most == 4);
}

TEST_CASE("shared cores: processor sharing between the stages that compute at the same time") {
  std::vector<stage_timing> t(2, stage_timing{.forward_s = 1.0, .backward_s = 2.0});
  // one micro-batch: the stages never overlap, sharing one core changes nothing
  CHECK(simulate_step(2, 1, t, one_f_one_b(2), {.cores = 1}).step_s == doctest::Approx(6.0));
  // four micro-batches on one core: the core is never idle, the step is all the work
  CHECK(simulate_step(2, 4, t, one_f_one_b(2), {.cores = 1}).step_s == doctest::Approx(2 * 4 * 3.0));
  // on two cores nothing is shared: the closed form
  CHECK(simulate_step(2, 4, t, one_f_one_b(2), {.cores = 2}).step_s == doctest::Approx(5 * 3.0));
  // two replicas per stage (dp 2) on two cores: overlapping stages run at half speed
  auto r = simulate_step(2, 4, t, one_f_one_b(2), {.cores = 2, .ranks_per_stage = 2});
  CHECK(r.step_s == doctest::Approx(2 * 4 * 3.0));
  // one stage alone: sharing with nobody
  std::vector<stage_timing> one(1, stage_timing{.forward_s = 1.0, .backward_s = 2.0});
  CHECK(simulate_step(1, 3, one, one_f_one_b(1), {.cores = 1}).step_s == doctest::Approx(9.0));
}
