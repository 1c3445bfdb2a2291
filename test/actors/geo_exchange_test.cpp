// Geo mode (--exec.mode=geo): replicas train their own copies of the tables and exchange the
// touched rows' deltas every K steps. After an exchange every replica's table is bit for bit
// the same, each touched row its base plus every replica's delta; a malformed block from the
// network changes nothing; the schedule exchanges every K steps and gathers like sync before
// every point where the job's state is read.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "actors/table_exchange.hpp"
#include "support/tensor_checks.hpp"
#include "transport/in_process.hpp"

using namespace cohort;
using namespace cohort::actors;

namespace {

// A flat piece: 3 dense elements, then a table of 6 rows x 2 columns, then 1 dense.
constexpr std::int64_t dense_before = 3, rows = 6, dim = 2;
constexpr std::int64_t flat = dense_before + rows * dim + 1;
constexpr float lr = 0.5f;

sparse_table_grad the_table(std::int64_t count) { return {dense_before, rows, dim, 0, count, 0}; }

// One local step's gradient: the replica's own block of `touched` rows (values from `seed`).
piece_gradient local_step(const std::vector<std::int32_t>& touched, std::uint64_t seed) {
  piece_gradient g;
  g.dense = tensor::zeros({flat});
  const auto count = static_cast<std::int64_t>(touched.size());
  g.blocks = 1;
  g.block_size = count * (1 + dim);
  g.entries = tensor::zeros({g.block_size});
  std::memcpy(g.entries.data<float>(), touched.data(), touched.size() * sizeof(std::int32_t));
  tensor values = cohort::test::random_tensor({count * dim}, seed);
  std::memcpy(g.entries.data<float>() + count, values.data<float>(), static_cast<std::size_t>(count * dim) * 4);
  g.tables.push_back(the_table(count));
  g.local = true;
  return g;
}

// What plain SGD does to the table from those steps' gradients alone (rows' deltas).
std::vector<float> sgd_delta(const std::vector<piece_gradient>& steps) {
  std::vector<float> d(static_cast<std::size_t>(rows * dim), 0.f);
  for (const auto& g : steps) {
    const auto count = g.tables[0].count;
    for (std::int64_t i = 0; i < count; ++i) {
      std::int32_t r;
      std::memcpy(&r, g.entries.data<float>() + i, sizeof r);
      for (std::int64_t j = 0; j < dim; ++j)
        d[static_cast<std::size_t>(r * dim + j)] -= lr * g.entries.data<float>()[count + i * dim + j];
    }
  }
  return d;
}

}  // namespace

TEST_CASE("geo mode's schedule: every K steps, and a gathered step before the end, a plan change and a checkpoint") {
  table_exchange ex{.mode = exchange_mode::geo, .geo_steps = 4, .steps = 11, .change_at = {6}, .checkpoint_every = 9};
  std::vector<std::int64_t> exchanges, gathers;
  for (std::int64_t s = 0; s < 11; ++s) {
    if (ex.exchanges_before(s)) exchanges.push_back(s);
    if (ex.gathers(s)) gathers.push_back(s);
  }
  CHECK(exchanges == std::vector<std::int64_t>{4, 5, 8, 10});  // 4 and 8; 5, 8, 10 end before 6, 9, 11
  CHECK(gathers == std::vector<std::int64_t>{5, 8, 10});
  table_exchange sync;
  sync.steps = 11;
  CHECK_FALSE(sync.exchanges_before(4));
  CHECK(parse_exchange_mode("geo").ok());
  CHECK(parse_exchange_mode("async").ok());
  CHECK(*parse_exchange_mode("hetero") == exchange_mode::hetero);
  table_exchange hetero;
  hetero.mode = exchange_mode::hetero;
  hetero.steps = 11;
  CHECK(hetero.hetero());
  CHECK(hetero.table_delay() == 0);  // the heterogeneous pipeline's tables are exact
  CHECK_FALSE(hetero.exchanges_before(4));
  CHECK(parse_exchange_mode("fast").error().code == errc::invalid_argument);
}

TEST_CASE(
    "geo exchange: two replicas that trained their own rows agree bit for bit, each row its base plus both deltas") {
  const tensor initial = cohort::test::random_tensor({flat}, 11);
  const optimizer_config sgd = sgd_config{.lr = lr};
  // replica 0 touches rows 1, 2 then 2, 4; replica 1 touches 2, 5 then 0; rows 3 untouched
  const std::vector<std::vector<piece_gradient>> steps = {{local_step({1, 2}, 1), local_step({2, 4}, 2)},
                                                          {local_step({2, 5}, 3), local_step({0}, 4)}};
  std::vector<tensor> storage;
  std::vector<std::shared_ptr<parameter_piece>> pieces;
  for (int r = 0; r < 2; ++r) {
    storage.push_back(initial.clone());
    pieces.push_back(std::make_shared<parameter_piece>(sgd));
    REQUIRE(pieces[r]->attach(storage[r]).ok());
    for (std::int64_t s = 0; s < 2; ++s) {
      REQUIRE(pieces[r]->submit(0, s, steps[r][s]).ok());
      REQUIRE(pieces[r]->apply_committed(s).ok());
    }
  }
  // trained apart: replica 0's row 1 moved, replica 1's did not
  CHECK(storage[0].data<float>()[dense_before + 1 * dim] != storage[1].data<float>()[dense_before + 1 * dim]);
  transport::in_process_fabric fabric(2);
  std::vector<result<std::int64_t>> sent(2, make_error(errc::closed, "not run"));
  const std::vector<sparse_table_grad> tables{the_table(0)};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      sent[r] = exchange_local_rows(*pieces[r], tables, fabric.endpoint(r), {0, 1}, 10, std::chrono::seconds(10));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) REQUIRE_MESSAGE(sent[r].ok(), sent[r].error().message);
  // each sends its encoding, its count and its rows with their deltas once: 2 + 3 x (1 + 2)
  CHECK(*sent[0] == (2 + 3 * (1 + dim)) * 4);
  CHECK(*sent[1] == (2 + 3 * (1 + dim)) * 4);
  CHECK(std::memcmp(storage[0].data<float>(), storage[1].data<float>(), flat * sizeof(float)) == 0);
  const auto d0 = sgd_delta(steps[0]), d1 = sgd_delta(steps[1]);
  for (std::int64_t i = 0; i < rows * dim; ++i) {
    CAPTURE(i);
    const float base = initial.data<float>()[dense_before + i];
    CHECK(storage[0].data<float>()[dense_before + i] ==
          doctest::Approx(base + d0[static_cast<std::size_t>(i)] + d1[static_cast<std::size_t>(i)]).epsilon(1e-6));
  }
  for (std::int64_t j = 0; j < dim; ++j)  // row 3: nobody touched it
    CHECK(storage[0].data<float>()[dense_before + 3 * dim + j] == initial.data<float>()[dense_before + 3 * dim + j]);
  // nothing kept any more: the next exchange sends its encoding and count alone, changes nothing
  const tensor before = storage[0].clone();
  threads.clear();
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      sent[r] = exchange_local_rows(*pieces[r], tables, fabric.endpoint(r), {0, 1}, 11, std::chrono::seconds(10));
    });
  for (auto& t : threads) t.join();
  REQUIRE(sent[0].ok());
  CHECK(*sent[0] == 8);
  CHECK(std::memcmp(storage[0].data<float>(), before.data<float>(), flat * sizeof(float)) == 0);
}

TEST_CASE("geo exchange: a malformed block from the network is refused and the table stays as it was") {
  std::vector<float> table(static_cast<std::size_t>(rows * dim), 1.f);
  const std::vector<table_span> spans{{table.data(), rows, dim, 0}};
  local_rows kept(1);
  const std::int32_t touched[] = {2};
  kept.keep(0, spans[0], touched, 1);
  table[2 * dim] = 3.f;
  std::vector<float> good(static_cast<std::size_t>(kept.packed_size(spans)));
  kept.pack(spans, good.data());
  const auto with_int = [](std::vector<float> b, std::size_t at, std::int32_t v) {
    std::memcpy(b.data() + at, &v, sizeof v);
    return b;
  };
  struct bad_block {
    const char* what;
    std::vector<float> block;
    const char* message;
  };
  std::vector<float> longer = good;
  longer.push_back(0.f);
  const std::vector<bad_block> bad = {
      {"no counts", {}, "shorter than its counts"},
      {"another encoding", with_int(good, 0, 1), "is not encoded as f32"},
      {"a count beyond the table", with_int(good, 1, rows + 1), "counts 7 rows"},
      {"a negative count", with_int(good, 1, -1), "counts -1 rows"},
      {"a row outside the table", with_int(good, 2, rows), "names row 6 outside"},
      {"rows cut off", std::vector<float>(good.begin(), good.end() - 1), "shorter than its rows"},
      {"trailing elements", longer, "longer than its rows"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.what);
    const std::vector<packed_block> blocks{{good.data(), static_cast<std::int64_t>(good.size())},
                                           {b.block.data(), static_cast<std::int64_t>(b.block.size())}};
    auto st = kept.merge(spans, blocks);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("replica 1's block") != std::string::npos);
    CHECK(st.error().message.find(b.message) != std::string::npos);
    CHECK(table[2 * dim] == 3.f);  // unchanged: the local value, the row still kept
    CHECK(kept.counts()[0] == 1);
  }
  const std::vector<packed_block> one{{good.data(), static_cast<std::int64_t>(good.size())}};
  REQUIRE(kept.merge(spans, one).ok());
  CHECK(table[2 * dim] == 3.f);  // 1 + (3 - 1)
  CHECK(kept.empty());
}

TEST_CASE("geo mode's end-of-run check: replicas that differ by one bit are named") {
  const planner::parallel_plan plan{.dp = 2, .tp = 2};  // ranks 0, 1 replica 0; 2, 3 replica 1
  std::vector<tensor> pieces;
  for (int r = 0; r < 4; ++r) pieces.push_back(tensor::full({5}, r % 2 == 0 ? 1.f : 2.f));
  CHECK(replicas_agree(plan, pieces).ok());
  pieces[3].data<float>()[4] = std::nextafter(2.f, 3.f);
  auto st = replicas_agree(plan, pieces);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("rank 3's parameters differ from replica 0's (rank 1)") != std::string::npos);
  const planner::parallel_plan sharded{.dp = 2, .tp = 2, .shard_params = true};  // pieces differ by design
  CHECK(replicas_agree(sharded, pieces).ok());
}

TEST_CASE("geo exchange with bf16 deltas: half the bytes, each delta rounded, the replicas still alike") {
  // three rows of dimension 2 changed by deltas bf16 holds exactly (0.5, -2) and does not (0.1)
  std::vector<std::vector<float>> tables(2, std::vector<float>(static_cast<std::size_t>(rows * dim), 1.f));
  std::vector<local_rows> kept(2, local_rows(1));
  const std::int32_t mine[2][2] = {{0, 1}, {1, 4}};
  const float delta[2] = {0.5f, 0.1f};
  std::vector<std::vector<float>> blocks;
  for (int r = 0; r < 2; ++r) {
    const std::vector<table_span> spans{{tables[r].data(), rows, dim, 0}};
    kept[r].keep(0, spans[0], mine[r], 2);
    for (std::int32_t row : mine[r])
      for (std::int64_t j = 0; j < dim; ++j) tables[r][static_cast<std::size_t>(row * dim + j)] += delta[r];
    blocks.emplace_back(static_cast<std::size_t>(kept[r].packed_size(spans, delta_encoding::bf16)));
    kept[r].pack(spans, blocks.back().data(), delta_encoding::bf16);
    CHECK(blocks.back().size() == 2 + 2 + 2);  // encoding, count, 2 rows, 4 bf16 deltas in 2 floats
  }
  const std::vector<packed_block> every{{blocks[0].data(), 6}, {blocks[1].data(), 6}};
  for (int r = 0; r < 2; ++r) {
    const std::vector<table_span> spans{{tables[r].data(), rows, dim, 0}};
    CHECK(kept[r].merge(spans, every, delta_encoding::f32).error().message.find("is not encoded as f32") !=
          std::string::npos);
    REQUIRE(kept[r].merge(spans, every, delta_encoding::bf16).ok());
  }
  CHECK(tables[0] == tables[1]);
  CHECK(tables[0][0] == 1.5f);                         // 0.5 exactly
  CHECK(tables[0][1 * dim] == 1.5f + 0.10009765625f);  // 0.1 rounded to bf16
  CHECK(tables[0][4 * dim] == doctest::Approx(1.1f).epsilon(1e-3));
  CHECK(tables[0][3 * dim] == 1.f);
}

TEST_CASE("a geo piece's export carries the rows it kept at their bases and leaves the live piece as trained") {
  // what a recovery copies: the tables as the replicas last agreed, the dense part as trained
  const tensor initial = cohort::test::random_tensor({flat}, 21);
  for (const optimizer_config cfg :
       {optimizer_config{sgd_config{.lr = lr}}, optimizer_config{adagrad_config{.lr = lr}}}) {
    tensor storage = initial.clone();
    parameter_piece piece(cfg);
    REQUIRE(piece.attach(storage).ok());
    piece_gradient g = local_step({1, 4}, 5);
    g.dense = cohort::test::random_tensor({flat}, 6);  // the dense elements move too
    REQUIRE(piece.submit(0, 0, g).ok());
    auto copy = piece.export_state(0);
    REQUIRE(copy.ok());
    const float* live = storage.data<float>();
    const float* out = copy->values.data<float>();
    const float* was = initial.data<float>();
    for (std::int64_t i = 0; i < flat; ++i) {
      const bool kept_row = i >= dense_before + 1 * dim && i < dense_before + 2 * dim;
      const bool kept_row4 = i >= dense_before + 4 * dim && i < dense_before + 5 * dim;
      const bool in_table = i >= dense_before && i < dense_before + rows * dim;
      CAPTURE(i);
      if (kept_row || kept_row4) {
        CHECK(out[i] == was[i]);   // back at its base
        CHECK(live[i] != was[i]);  // the live piece keeps its own update
      } else if (in_table) {
        CHECK(out[i] == was[i]);  // untouched rows: as they were everywhere
      } else {
        CHECK(out[i] == live[i]);  // the dense part as trained
        CHECK(out[i] != was[i]);
      }
    }
    if (std::holds_alternative<adagrad_config>(cfg)) {  // the rows' optimizer state goes back with them
      REQUIRE(copy->slots.size() == 1);
      CHECK(copy->slots[0].data<float>()[dense_before + 1 * dim] == 0.f);
    }
  }
}

TEST_CASE("a recovery's note on the tables: async applies the waiting entries, geo goes back to the last exchange") {
  table_exchange geo;
  geo.mode = exchange_mode::geo;
  geo.geo_steps = 8;
  geo.steps = 40;
  geo.checkpoint_every = 12;
  CHECK(geo.agreed_through(13) == 12);  // the checkpoint after step 12 gathered
  CHECK(geo.agreed_through(11) == 8);
  CHECK(geo.agreed_through(7) == 0);
  // the exchange before step 16 belongs to the step a recovery redoes: undone everywhere
  CHECK(geo.agreed_through(16) == 12);
  CHECK(geo.agreed_through(17) == 16);
  CHECK(geo.agreed_through(24) == 24);  // step 23 gathered as sync (the checkpoint after step 24)
  CHECK(geo.recovery_note(11) ==
        "geo: the tables as the replicas last agreed (after step 8): every replica's own sparse updates of steps 9-11 "
        "dropped");
  CHECK(
      geo.recovery_note(16) ==
      "geo: the tables as the replicas last agreed (after step 12): every replica's own sparse updates of steps 13-16 "
      "dropped");
  CHECK(geo.recovery_note(24) == "geo: the tables as the replicas agreed after step 24");
  table_exchange async;
  async.mode = exchange_mode::async;
  async.staleness = 3;
  CHECK(async.recovery_note(5).find("async: the tables' waiting entries applied at the recovery (the next 3 steps") ==
        0);
  CHECK(table_exchange{}.recovery_note(5).empty());  // sync: nothing beyond the step redone
  async.staleness = 0;
  CHECK(async.recovery_note(5).empty());  // staleness 0 is sync
}

TEST_CASE("a recovery after an exchange that stopped halfway: every replica back before it whichever merged") {
  // two replicas train rows of their own for two committed steps; the exchange before step 2
  // merges on replica 0 and fails on replica 1 (the process it waited for died): the copies a
  // recovery takes (export at the last committed step, 1) agree bit for bit, tables and state
  const tensor initial = cohort::test::random_tensor({flat}, 31);
  const std::vector<std::vector<piece_gradient>> steps = {{local_step({1, 2}, 1), local_step({2, 4}, 2)},
                                                          {local_step({2, 5}, 3), local_step({0}, 4)}};
  const std::vector<sparse_table_grad> tables{the_table(0)};
  for (const optimizer_config cfg :
       {optimizer_config{sgd_config{.lr = lr}}, optimizer_config{adagrad_config{.lr = lr}}}) {
    std::vector<tensor> storage;
    std::vector<std::unique_ptr<parameter_piece>> pieces;
    std::vector<std::vector<float>> blocks(2);
    for (int r = 0; r < 2; ++r) {
      storage.push_back(initial.clone());
      pieces.push_back(std::make_unique<parameter_piece>(cfg));
      REQUIRE(pieces[r]->attach(storage[r]).ok());
      for (std::int64_t s = 0; s < 2; ++s) {
        REQUIRE(pieces[r]->submit(0, s, steps[r][s]).ok());
        REQUIRE(pieces[r]->apply_committed(s).ok());
      }
      REQUIRE(pieces[r]
                  ->with_local_rows(tables,
                                    [&](local_rows& kept, const std::vector<table_span>& spans) {
                                      blocks[r].resize(static_cast<std::size_t>(kept.packed_size(spans)));
                                      kept.pack(spans, blocks[r].data());
                                    })
                  .ok());
    }
    const std::vector<packed_block> both{{blocks[0].data(), static_cast<std::int64_t>(blocks[0].size())},
                                         {blocks[1].data(), static_cast<std::int64_t>(blocks[1].size())}};
    status merged = make_error(errc::closed, "not merged");
    REQUIRE(pieces[0]
                ->with_local_rows(tables,
                                  [&](local_rows& kept, const std::vector<table_span>& spans) {
                                    merged = kept.merge(spans, both, delta_encoding::f32, /*step=*/2);
                                  })
                .ok());
    REQUIRE(merged.ok());
    CHECK(std::memcmp(storage[0].data<float>(), storage[1].data<float>(), flat * sizeof(float)) != 0);
    auto first = pieces[0]->export_state(1), second = pieces[1]->export_state(1);
    REQUIRE(first.ok());
    REQUIRE(second.ok());
    CHECK(std::memcmp(first->values.data<float>(), second->values.data<float>(), flat * sizeof(float)) == 0);
    for (std::int64_t i = 0; i < rows * dim; ++i)  // as the replicas last agreed: the start
      CHECK(first->values.data<float>()[dense_before + i] == initial.data<float>()[dense_before + i]);
    REQUIRE(first->slots.size() == second->slots.size());
    for (std::size_t k = 0; k < first->slots.size(); ++k)
      CHECK(std::memcmp(first->slots[k].data<float>(), second->slots[k].data<float>(), flat * sizeof(float)) == 0);
    // once step 2 committed its exchange stands: replica 0's copy keeps the merged rows
    auto later = pieces[0]->export_state(2);
    REQUIRE(later.ok());
    CHECK(std::memcmp(later->values.data<float>(), storage[0].data<float>(), flat * sizeof(float)) == 0);
  }
}
