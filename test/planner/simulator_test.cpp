// The discrete-event simulator against the closed forms of a synchronous pipeline: with
// equal stages, forward f and backward b per micro-batch, one step takes (m + p - 1)(f + b)
// under GPipe and 1F1B alike, and the idle fraction is (p - 1) / (m + p - 1).
#include <doctest/doctest.h>

#include "planner/cost_model.hpp"
#include "planner/plan.hpp"
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

TEST_CASE("interleaved 1F1B: the bubble shrinks by v, as Megatron's (p - 1)(f + b) / v") {
  // the same model (f + b per micro-batch on each rank) cut into p x v equal stages
  for (int p : {2, 4, 8})
    for (int v : {1, 2, 4})
      for (int groups : {1, 2, 4}) {
        const int m = p * groups;
        CAPTURE(p);
        CAPTURE(v);
        CAPTURE(m);
        parallel_plan plan{.pp = p, .micro_batches = m, .virtual_stages = v};
        std::vector<stage_timing> t(static_cast<std::size_t>(p * v),
                                    stage_timing{.forward_s = 1.0 / v, .backward_s = 2.0 / v, .update_s = 0.5 / v});
        auto r = simulate_step(p, v, m, t, [&](int rank) { return plan.buffer_size(rank); });
        // every chunk's update at once, after the rank's last backward
        CHECK(r.step_s == doctest::Approx(m * 3.0 + (p - 1) * 3.0 / v + 0.5));
        REQUIRE(r.busy_s.size() == static_cast<std::size_t>(p));
        for (double busy : r.busy_s) CHECK(busy == doctest::Approx(m * 3.0));
        REQUIRE(r.task_wall_s.size() == static_cast<std::size_t>(p));
        CHECK(r.task_wall_s[0][2] == doctest::Approx(0.5));
      }
}

TEST_CASE("interleaved 1F1B pays its transfers v times") {
  // pp2 v2 m2, 1 s per task, 0.25 s for every transfer between stages. Orders: rank 0
  // "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1", rank 1 "F0 F1 F0.1 B0.1 F1.1 B1.1 B0 B1". By hand, event by
  // event: rank 0 F0 [0,1] F1 [1,2]; rank 1 F0 [1.25,2.25] F1 [2.25,3.25]; rank 0 F0.1 [2.5,3.5]
  // F1.1 [3.5,4.5]; rank 1 F0.1 [3.75,4.75] B0.1 [4.75,5.75] F1.1 [5.75,6.75] B1.1 [6.75,7.75];
  // rank 0 B0.1 [6,7] B1.1 [8,9]; rank 1 B0 [7.75,8.75] B1 [9.25,10.25]; rank 0 B0 [9,10] B1 [10.5,11.5].
  parallel_plan plan{.pp = 2, .micro_batches = 2, .virtual_stages = 2};
  auto credit = [&](int rank) { return plan.buffer_size(rank); };
  std::vector<stage_timing> t(
      4, stage_timing{.forward_s = 1.0, .backward_s = 1.0, .send_forward_s = 0.25, .send_backward_s = 0.25});
  CHECK(to_string(build_schedule(2, 2, 2, credit)[0]) == "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1 U");
  CHECK(to_string(build_schedule(2, 2, 2, credit)[1]) == "F0 F1 F0.1 B0.1 F1.1 B1.1 B0 B1 U");
  CHECK(simulate_step(2, 2, 2, t, credit).step_s == doctest::Approx(11.5));
  CHECK(simulate_step(2, 2, 2, std::vector<stage_timing>(3), [](int) { return 4; }).step_s == 0);  // wrong size
}

TEST_CASE("with no core shared the direct replay equals the event-by-event simulation") {
  // cores = 0 takes the direct path (each task's times from those before it); cores a hair
  // below every rank busy at once takes the event loop at a rate of 1 - 1e-12: the same
  // timeline within 1e-9 relative, for uneven stages, transfers, GPipe, 1F1B and interleaving
  std::uint64_t seed = 12345;
  auto uniform = [&] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return 0.1 + static_cast<double>(seed >> 11) / static_cast<double>(1ULL << 53);
  };
  auto close = [](double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); };
  for (int ranks : {1, 2, 3, 5})
    for (int chunks : {1, 2, 3})
      for (int m : {1, 2, 3, 6, 7, 12}) {
        if (chunks > 1 && (ranks < 2 || m % ranks != 0)) continue;
        for (bool gpipe : {false, true}) {
          if (gpipe && chunks > 1) continue;
          std::vector<stage_timing> timing(static_cast<std::size_t>(ranks * chunks));
          for (auto& t : timing)
            t = {.forward_s = uniform(),
                 .backward_s = 2 * uniform(),
                 .send_forward_s = 0.2 * uniform(),
                 .send_backward_s = 0.2 * uniform(),
                 .update_s = uniform()};
          parallel_plan plan{.pp = ranks,
                             .micro_batches = m,
                             .schedule = gpipe ? schedule_kind::gpipe : schedule_kind::one_f_one_b,
                             .virtual_stages = chunks};
          auto credit = [&](int r) { return plan.buffer_size(r); };
          auto direct = simulate_step(ranks, chunks, m, timing, credit);
          auto events = simulate_step(ranks, chunks, m, timing, credit, core_sharing{ranks * (1 - 1e-12), 1});
          INFO("pp " << ranks << " v " << chunks << " m " << m << (gpipe ? " gpipe" : " 1f1b"));
          REQUIRE(direct.task_wall_s.size() == static_cast<std::size_t>(ranks));
          REQUIRE(events.task_wall_s.size() == static_cast<std::size_t>(ranks));
          CHECK(close(direct.step_s, events.step_s));
          CHECK(std::abs(direct.bubble - events.bubble) <= 1e-9);
          for (std::size_t r = 0; r < direct.busy_s.size(); ++r) {
            CHECK(close(direct.busy_s[r], events.busy_s[r]));
            for (std::size_t k = 0; k < 3; ++k) CHECK(close(direct.task_wall_s[r][k], events.task_wall_s[r][k]));
          }
        }
      }
}
