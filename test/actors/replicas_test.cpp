// Buddy copies (actors/replicas.hpp): who keeps whose copy for the plans users run across
// processes, and that a copy seeded from a piece and fed the same gradients over a channel
// stays bit-identical to it — dense pieces with AdamW's slots, pieces holding a sparse table
// (only the runs outside the table and the entries travel) — and that malformed messages are
// refused with the part named.
#include <doctest/doctest.h>

#include <cstring>

#include "actors/param_actor.hpp"
#include "actors/replicas.hpp"
#include "graph/random.hpp"
#include "transport/in_process.hpp"

using namespace cohort;
using namespace cohort::actors;
using namespace std::chrono_literals;

namespace {

planner::parallel_plan plan_of(int dp, int tp, int pp, bool shard = false) {
  planner::parallel_plan p;
  p.dp = dp, p.tp = tp, p.pp = pp, p.shard_params = shard;
  return p;
}

tensor random_tensor(std::int64_t n, std::uint64_t seed) {
  tensor t = tensor::empty({n});
  rng g(seed);
  for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = 2.f * g.uniform() - 1.f;
  return t;
}

bool same_bits(const tensor& a, const tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data<float>(), b.data<float>(), a.numel() * sizeof(float)) == 0;
}

// A piece of 5 dense elements, a table of 4 rows x 3 (elements 5..16) and 2 dense, with one
// replica block of 2 entries (rows 1 and 3).
piece_gradient table_gradient(std::uint64_t seed) {
  piece_gradient g;
  g.dense = random_tensor(19, seed);
  for (std::int64_t i = 5; i < 17; ++i) g.dense.data<float>()[i] = 0.f;
  g.blocks = 1;
  g.block_size = 2 * (1 + 3);
  g.entries = random_tensor(g.block_size, seed + 1);
  const std::int32_t rows[2] = {1, 3};
  std::memcpy(g.entries.data<float>(), rows, sizeof rows);
  g.tables.push_back({/*offset=*/5, /*rows=*/4, /*dim=*/3, /*first=*/0, /*count=*/2, /*first_row=*/0});
  return g;
}

}  // namespace

TEST_CASE("each piece without a data-parallel replica elsewhere has its copy on the next process") {
  CHECK(buddy_ranks(plan_of(1, 1, 2), {0, 1}) == std::vector<int>({1, 0}));
  CHECK(buddy_ranks(plan_of(1, 2, 1), {0, 1}) == std::vector<int>({1, 0}));
  CHECK(buddy_ranks(plan_of(1, 1, 4), {0, 1, 2, 3}) == std::vector<int>({1, 2, 3, 0}));
  // a data-parallel replica on the other process: nothing to copy
  CHECK(buddy_ranks(plan_of(2, 1, 1), {0, 1}) == std::vector<int>({-1, -1}));
  CHECK(buddy_ranks(plan_of(2, 1, 2), {0, 0, 1, 1}) == std::vector<int>({-1, -1, -1, -1}));
  // sharded pieces differ: each is copied
  CHECK(buddy_ranks(plan_of(2, 1, 1, true), {0, 1}) == std::vector<int>({1, 0}));
  // replicas in one process only: copied to the other; the copies dealt over its ranks
  CHECK(buddy_ranks(plan_of(2, 1, 1), {0, 0}) == std::vector<int>({-1, -1}));
  CHECK(buddy_ranks(plan_of(1, 1, 4), {0, 0, 1, 1}) == std::vector<int>({2, 3, 0, 1}));
  CHECK(buddy_ranks(plan_of(1, 1, 3), {0, 0, 1}) == std::vector<int>({2, 2, 0}));
  CHECK(buddy_ranks(plan_of(2, 1, 2), {0, 0, 0, 1}) == std::vector<int>({3, -1, 3, -1}));  // stage 0 twice on process 0
  // a lost process's ranks placed on those that remain: the next process that hosts any
  CHECK(buddy_ranks(plan_of(1, 1, 3), {0, 2, 2}) == std::vector<int>({1, 0, 0}));
  CHECK(copies_kept_by({2, 2, 0}, 2) == std::vector<int>({0, 1}));
  CHECK(copies_kept_by({2, 2, 0}, 1).empty());
}

TEST_CASE("a copy seeded from a piece and fed its gradients stays bit-identical to it") {
  transport::in_process_fabric fabric(2);
  transport::channel& owner_end = fabric.endpoint(0);
  transport::channel& buddy_end = fabric.endpoint(1);
  SUBCASE("a dense piece under AdamW") {
    const optimizer_config opt = adamw_config{.lr = 0.01f, .weight_decay = 0.1f};
    parameter_piece piece(opt);
    REQUIRE(piece.attach(random_tensor(64, 7)));
    // two steps before the copy starts (its seed carries the slots and the step count)
    for (std::int64_t step = 0; step < 2; ++step) {
      REQUIRE(piece.submit(0, step, random_tensor(64, 100 + step)));
      REQUIRE(piece.apply_committed(step));
    }
    parameter_piece copy(opt);
    auto snap = piece.snapshot();
    REQUIRE(snap);
    REQUIRE(send_seed(owner_end, 1, 2, *snap, 1s));
    auto seed = receive_seed(buddy_end, 0, 2, 2, 1s);
    REQUIRE_MESSAGE(seed, seed.error().message);
    CHECK(seed->steps == 2);
    copy.seed(std::move(*seed));
    tensor scratch;
    for (std::int64_t step = 2; step < 6; ++step) {
      piece_gradient g;
      g.dense = random_tensor(64, 100 + step);
      REQUIRE(piece.submit(0, step, g));
      REQUIRE(send_gradient(owner_end, 1, static_cast<std::uint64_t>(step), g, 1s));
      auto got = receive_gradient(buddy_end, 0, static_cast<std::uint64_t>(step), copy.size(), scratch, 1s);
      REQUIRE_MESSAGE(got, got.error().message);
      REQUIRE(copy.submit(0, step, std::move(*got)));
      if (step == 4) {  // a step that fails is never committed: dropped on both
        REQUIRE(piece.rollback(1, 3));
        REQUIRE(copy.rollback(1, 3));
        break;
      }
      REQUIRE(piece.apply_committed(step));
      REQUIRE(copy.apply_committed(step));
    }
    auto a = piece.export_state(3), b = copy.export_state(3);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->steps == 4);
    CHECK(b->steps == 4);
    CHECK(same_bits(a->values, b->values));
    REQUIRE(a->slots.size() == 2);
    REQUIRE(b->slots.size() == 2);
    CHECK(same_bits(a->slots[0], b->slots[0]));
    CHECK(same_bits(a->slots[1], b->slots[1]));
  }
  SUBCASE("a piece holding a sparse table under Adagrad") {
    const optimizer_config opt = adagrad_config{.lr = 0.05f};
    parameter_piece piece(opt), copy(opt);
    REQUIRE(piece.attach(random_tensor(19, 3)));
    auto snap = piece.snapshot();
    REQUIRE(snap);
    REQUIRE(send_seed(owner_end, 1, 0, *snap, 1s));
    auto seed = receive_seed(buddy_end, 0, 0, 1, 1s);
    REQUIRE_MESSAGE(seed, seed.error().message);
    copy.seed(std::move(*seed));
    tensor scratch;
    for (std::int64_t step = 0; step < 3; ++step) {
      const piece_gradient g = table_gradient(200 + static_cast<std::uint64_t>(step));
      REQUIRE(piece.submit(0, step, g));
      REQUIRE(send_gradient(owner_end, 1, static_cast<std::uint64_t>(step), g, 1s));
      auto got = receive_gradient(buddy_end, 0, static_cast<std::uint64_t>(step), copy.size(), scratch, 1s);
      REQUIRE_MESSAGE(got, got.error().message);
      CHECK(got->tables.size() == 1);
      CHECK(got->blocks == 1);
      REQUIRE(copy.submit(0, step, std::move(*got)));
      REQUIRE(piece.apply_committed(step));
      REQUIRE(copy.apply_committed(step));
    }
    auto a = piece.export_state(2), b = copy.export_state(2);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(same_bits(a->values, b->values));
    CHECK(same_bits(a->slots[0], b->slots[0]));
  }
}

TEST_CASE("a copy refuses what does not fit it, naming the part") {
  transport::in_process_fabric fabric(2);
  piece_state st;
  st.values = tensor::zeros({8});
  st.slots = {tensor::zeros({8})};
  st.steps = 3;
  REQUIRE(send_seed(fabric.endpoint(0), 1, 5, st, 1s));
  auto seed = receive_seed(fabric.endpoint(1), 0, 5, 2, 1s);  // AdamW expects two slots
  REQUIRE_FALSE(seed);
  CHECK(seed.error().message.find("buddy copy from rank 0: a seed of 1 optimizer slots (expected 2)") == 0);
  piece_gradient g;
  g.dense = tensor::zeros({8});
  REQUIRE(send_gradient(fabric.endpoint(0), 1, 5, g, 1s));
  tensor scratch;
  auto got = receive_gradient(fabric.endpoint(1), 0, 5, 9, scratch, 1s);
  REQUIRE_FALSE(got);
  CHECK(got.error().message == "buddy copy from rank 0: a gradient of 8 elements for a piece of 9");
  g.local = true;  // geo mode's own rows: a copy could not follow them
  CHECK_FALSE(send_gradient(fabric.endpoint(0), 1, 6, g, 1s));
  // nothing sent: the wait is bounded
  auto late = receive_gradient(fabric.endpoint(1), 0, 7, 8, scratch, 50ms);
  REQUIRE_FALSE(late);
  CHECK(late.error().code == errc::timeout);
  parameter_piece bare(sgd_config{});
  CHECK_FALSE(bare.holds_values());
  CHECK_FALSE(bare.snapshot());
}
