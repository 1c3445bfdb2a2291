// A parameter piece updated from sparse table entries (compile_options::sparse_tables) is
// the piece updated from the dense gradient, bit for bit: the dense rule on what no table
// covers, the touched rows of each table from their entries gathered over the replicas —
// also when the piece holds only part of a table (a ZeRO piece's boundary cuts it).
#include <doctest/doctest.h>

#include <cstring>

#include "actors/param_actor.hpp"
#include "actors/param_shard.hpp"
#include "graph/random.hpp"

using namespace cohort;
using namespace cohort::actors;

namespace {

// A flat buffer: 5 dense elements, a table of 4 rows x 3 columns (elements 5..16), 2 dense.
constexpr std::int64_t dense_before = 5, table_rows = 4, dim = 3, dense_after = 2;
constexpr std::int64_t flat = dense_before + table_rows * dim + dense_after;

struct entries {
  std::vector<std::int32_t> rows;  // per replica block, in order
  std::vector<float> values;
};

// Two replicas' blocks of 3 entries each (a row twice, a padding entry, an untouched row).
std::vector<entries> two_blocks() {
  return {{{2, -1, 0}, {0.5f, -1.f, 2.f, 9.f, 9.f, 9.f, 0.25f, 0.125f, -4.f}},
          {{2, 3, 2}, {1.f, 1.f, 1.f, -0.5f, 0.75f, 3.f, 0.1f, 0.2f, 0.3f}}};
}

// The dense gradient the entries stand for (sums by row, in entry order, from zero).
tensor dense_gradient(const std::vector<entries>& blocks, const tensor& dense_part) {
  tensor g = dense_part.clone();
  float* p = g.data<float>();
  for (std::int64_t i = 0; i < table_rows * dim; ++i) p[dense_before + i] = 0.f;
  for (const auto& b : blocks)
    for (std::size_t e = 0; e < b.rows.size(); ++e)
      if (b.rows[e] >= 0)
        for (std::int64_t j = 0; j < dim; ++j) p[dense_before + b.rows[e] * dim + j] += b.values[e * dim + j];
  return g;
}

piece_gradient sparse_gradient(const std::vector<entries>& blocks, const tensor& dense_part, std::int64_t begin,
                               std::int64_t end) {
  piece_gradient out;
  out.dense = dense_part.slice(0, begin, end).clone();
  const std::int64_t count = static_cast<std::int64_t>(blocks[0].rows.size());
  out.blocks = static_cast<std::int64_t>(blocks.size());
  out.block_size = count * (1 + dim);
  out.entries = tensor::zeros({out.blocks * out.block_size});
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    float* block = out.entries.data<float>() + static_cast<std::int64_t>(b) * out.block_size;
    std::memcpy(block, blocks[b].rows.data(), blocks[b].rows.size() * sizeof(std::int32_t));
    std::memcpy(block + count, blocks[b].values.data(), blocks[b].values.size() * sizeof(float));
  }
  out.tables.push_back({dense_before - begin, table_rows, dim, 0, count, 0});
  return out;
}

void check_bits(const tensor& a, const tensor& b) {
  REQUIRE(a.numel() == b.numel());
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(a.data<float>() + i, b.data<float>() + i, sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("a piece updated from sparse table entries equals the dense update bit for bit") {
  rng r(11);
  tensor initial = tensor::empty({flat}), dense_part = tensor::empty({flat});
  for (std::int64_t i = 0; i < flat; ++i) {
    initial.data<float>()[i] = r.normal();
    dense_part.data<float>()[i] = r.normal();
  }
  const auto blocks = two_blocks();
  for (const optimizer_config& cfg :
       {optimizer_config{sgd_config{.lr = 0.1f}}, optimizer_config{adagrad_config{.lr = 0.05f}}}) {
    param_shard dense(initial.clone(), cfg);
    param_shard sparse(initial.clone(), cfg);
    for (int step = 0; step < 3; ++step) {  // Adagrad's sums carry over
      REQUIRE(dense.update(dense_gradient(blocks, dense_part)).ok());
      auto st = sparse.update(sparse_gradient(blocks, dense_part, 0, flat));
      REQUIRE_MESSAGE(st.ok(), st.error().message);
    }
    check_bits(sparse.params(), dense.params());
    CHECK(sparse.steps() == 3);
    for (std::size_t s = 0; s < dense.optimizer_state().slots.size(); ++s)
      check_bits(sparse.optimizer_state().slots[s], dense.optimizer_state().slots[s]);
    // untouched row 1 of the table never moved
    for (std::int64_t j = 0; j < dim; ++j)
      CHECK(sparse.params().data<float>()[dense_before + dim + j] == initial.data<float>()[dense_before + dim + j]);

    // Pieces that cut the table (a ZeRO split of the flat buffer): each is its slice of the dense update.
    for (auto [begin, end] : {std::pair<std::int64_t, std::int64_t>{0, 9}, {9, flat}, {7, 12}, {12, 19}}) {
      CAPTURE(begin);
      param_shard part(initial.slice(0, begin, end).clone(), cfg);
      for (int step = 0; step < 3; ++step) REQUIRE(part.update(sparse_gradient(blocks, dense_part, begin, end)).ok());
      check_bits(part.params(), dense.params().slice(0, begin, end).clone());
    }
  }
}

TEST_CASE("a row shard of a table takes the entries of its rows and leaves the others to its peers") {
  rng r(12);
  tensor initial = tensor::empty({flat}), dense_part = tensor::empty({flat});
  for (std::int64_t i = 0; i < flat; ++i) {
    initial.data<float>()[i] = r.normal();
    dense_part.data<float>()[i] = r.normal();
  }
  const auto blocks = two_blocks();
  const optimizer_config cfg = adagrad_config{.lr = 0.05f};
  param_shard whole(initial.clone(), cfg);
  REQUIRE(whole.update(dense_gradient(blocks, dense_part)).ok());
  // the shard holds rows 2..3 only: a piece of those rows alone, entries naming the whole table's rows
  const std::int64_t first_row = 2, rows = 2;
  const std::int64_t begin = dense_before + first_row * dim, end = begin + rows * dim;
  param_shard shard(initial.slice(0, begin, end).clone(), cfg);
  auto g = sparse_gradient(blocks, dense_part, begin, end);
  g.tables[0] = {0, rows, dim, 0, static_cast<std::int64_t>(blocks[0].rows.size()), first_row};
  auto st = shard.update(g);
  REQUIRE_MESSAGE(st.ok(), st.error().message);
  check_bits(shard.params(), whole.params().slice(0, begin, end).clone());
  check_bits(shard.optimizer_state().slots[0], whole.optimizer_state().slots[0].slice(0, begin, end).clone());
}

TEST_CASE("sparse table entries are refused when they lie outside their block or the rule moves every row") {
  tensor initial = tensor::zeros({flat}), dense_part = tensor::full({flat}, 0.5f);
  param_shard adamw(initial.clone(), adamw_config{.lr = 1e-3f});
  auto refused = adamw.update(sparse_gradient(two_blocks(), dense_part, 0, flat));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("AdamW moves every row") != std::string::npos);
  param_shard sgd(initial.clone(), sgd_config{.lr = 0.1f});
  auto bad = sparse_gradient(two_blocks(), dense_part, 0, flat);
  bad.tables[0].count = 10;  // past its block
  auto outside = sgd.update(bad);
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.error().message.find("outside their block") != std::string::npos);
  CHECK(sgd.steps() == 0);
  auto short_piece = sparse_gradient(two_blocks(), dense_part, 0, flat - 1);
  auto wrong = sgd.update(short_piece);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message.find("gradient piece of 18 elements for a piece of 19") != std::string::npos);
}

TEST_CASE("async mode's piece: a step's table entries apply exactly `delay` steps after its dense part") {
  // Steps 0..4 each touch rows 0, 2 and 3 (two_blocks()); with delay 2 the table after the
  // commit of step k holds the updates of steps 0..k-2, the dense part those of 0..k; reading
  // the state whole (fetch) applies what waits, and the piece is then the sync one, bit for bit.
  const tensor initial = tensor::full({flat}, 0.5f);
  const tensor dense_part = tensor::full({flat}, 0.25f);
  for (const optimizer_config sgd :
       {optimizer_config(sgd_config{.lr = 0.1f}), optimizer_config(adagrad_config{.lr = 0.05f})}) {
    CAPTURE(sgd.index());
    auto run = [&](std::int64_t delay, std::int64_t through, parameter_piece& piece, tensor& storage) {
      REQUIRE(piece.attach(storage).ok());
      for (std::int64_t s = 0; s <= through; ++s) {
        piece_gradient g = sparse_gradient(two_blocks(), dense_part, 0, flat);
        g.delay = delay;
        REQUIRE(piece.submit(0, s, g).ok());
        REQUIRE(piece.apply_committed(s).ok());
      }
    };
    tensor sync_storage = initial.clone(), async_storage = initial.clone();
    parameter_piece sync(sgd), async(sgd);
    run(0, 4, sync, sync_storage);
    run(2, 4, async, async_storage);
    CHECK(sync.tables_through() == 5);
    CHECK(async.tables_through() == 3);  // steps 0, 1, 2
    // the dense part is current; the table holds 3 of the 5 steps' updates
    for (std::int64_t i = 0; i < dense_before; ++i)
      CHECK(async_storage.data<float>()[i] == sync_storage.data<float>()[i]);
    // a piece that applied steps 0..2's tables only: the sync piece after step 2
    tensor three = initial.clone();
    parameter_piece sync3(sgd);
    run(0, 2, sync3, three);
    for (std::int64_t i = dense_before; i < dense_before + table_rows * dim; ++i) {
      CAPTURE(i);
      CHECK(async_storage.data<float>()[i] == three.data<float>()[i]);
    }
    CHECK(async_storage.data<float>()[dense_before + 2 * dim] != sync_storage.data<float>()[dense_before + 2 * dim]);
    auto whole = async.fetch(4);  // applies the two waiting steps
    REQUIRE(whole.ok());
    CHECK(async.tables_through() == 5);
    CHECK(std::memcmp(whole->data<float>(), sync_storage.data<float>(), flat * sizeof(float)) == 0);
    auto sync_state = sync.export_state(4), async_state = async.export_state(4);  // Adagrad's sums alike
    REQUIRE(sync_state.ok());
    REQUIRE(async_state.ok());
    REQUIRE(sync_state->slots.size() == async_state->slots.size());
    for (std::size_t i = 0; i < sync_state->slots.size(); ++i)
      CHECK(std::memcmp(sync_state->slots[i].data<float>(), async_state->slots[i].data<float>(),
                        flat * sizeof(float)) == 0);
  }
}
