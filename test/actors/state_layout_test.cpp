// Piece layouts and the state transfer between two plans: every element of every parameter
// and optimizer slot lands where the new plan keeps it — checked by filling the old pieces
// with each element's own global index and reading it back from the new ones — and the
// exchange across processes gives exactly what the transfer in one process gives.
#include <doctest/doctest.h>

#include <thread>

#include "actors/state_layout.hpp"
#include "actors/transition.hpp"
#include "apps/models/gpt.hpp"
#include "apps/models/mlp.hpp"
#include "planner/rank_layout.hpp"
#include "support/coded_pieces.hpp"
#include "transport/in_process.hpp"

using namespace cohort;
using namespace cohort::actors;
using cohort::test::check_coded;
using cohort::test::code;
using cohort::test::coded_states;
using planner::parallel_plan;

namespace {

const model_fn mlp = [](graph& g, std::int64_t b) { return apps::build_mlp(g, {24, 36, 30, 10}, b).loss; };
const model_fn gpt = [](graph& g, std::int64_t b) {
  return apps::build_gpt(g, {.layers = 2, .d = 24, .heads = 3, .seq = 8, .vocab = 256}, b).loss;
};

std::shared_ptr<compiled_model> compiled(const model_fn& m, const parallel_plan& p) {
  auto cm = compile(m, p, 8);
  REQUIRE_MESSAGE(cm.ok(), cm.error().message);
  return std::make_shared<compiled_model>(std::move(*cm));
}

struct pair_case {
  const char* name;
  parallel_plan from, to;
};

std::vector<pair_case> cases() {
  return {{"dp2 sharded -> tp2 pp2 m4", {.dp = 2, .shard_params = true}, {.tp = 2, .pp = 2, .micro_batches = 4}},
          {"tp2 pp2 m4 -> dp2 sharded", {.tp = 2, .pp = 2, .micro_batches = 4}, {.dp = 2, .shard_params = true}},
          {"dp2 -> pp2 m4", {.dp = 2}, {.pp = 2, .micro_batches = 4}},
          {"tp3 -> dp2 tp2 sharded", {.tp = 3}, {.dp = 2, .tp = 2, .shard_params = true}},
          {"dp2 tp2 pp2 m2 -> serial", {.dp = 2, .tp = 2, .pp = 2, .micro_batches = 2}, {}},
          {"serial -> dp4 sharded", {}, {.dp = 4, .shard_params = true}},
          {"pp2 m4 -> pp2 v2 m4", {.pp = 2, .micro_batches = 4}, {.pp = 2, .micro_batches = 4, .virtual_stages = 2}},
          {"dp2 tp2 pp2 v2 m2 -> tp2 sharded dp2",
           {.dp = 2, .tp = 2, .pp = 2, .micro_batches = 2, .virtual_stages = 2},
           {.dp = 2, .tp = 2, .shard_params = true}}};
}

// Two processes, each its own thread over one in-process fabric of the old plan's ranks, each
// holding only its own old pieces of `all`: what exchange_state gives each.
std::vector<result<exchanged_state>> exchange_between_two(const exchange_options& o, int old_ranks,
                                                          const std::vector<state_copy>& copies,
                                                          const std::vector<piece_state>& all,
                                                          const std::vector<piece_layout>& to) {
  transport::in_process_fabric fabric(old_ranks);
  std::vector<result<exchanged_state>> got(2, make_error(errc::closed, "not run"));
  std::vector<std::thread> processes;
  for (int p = 0; p < 2; ++p)
    processes.emplace_back([&, p] {
      exchange_options mine = o;
      mine.process = p;
      std::vector<piece_state> local(all.size());  // only this process's old pieces
      for (std::size_t r = 0; r < all.size(); ++r)
        if (o.old_owner[r] == p) local[r] = all[r];
      got[static_cast<std::size_t>(p)] = exchange_state(fabric, mine, copies, local, to);
    });
  for (auto& t : processes) t.join();
  return got;
}

}  // namespace

TEST_CASE("every parameter element and optimizer slot reaches the new layout, for MLP and GPT plan pairs") {
  for (const auto* m : {&mlp, &gpt})
    for (const auto& c : cases()) {
      const std::string pair = c.name;
      CAPTURE(pair);
      auto from = piece_layouts(*compiled(*m, c.from));
      auto to = piece_layouts(*compiled(*m, c.to));
      REQUIRE(from.ok());
      REQUIRE(to.ok());
      auto copies = plan_state_transfer(*from, *to);
      REQUIRE_MESSAGE(copies.ok(), copies.error().message);
      auto moved = apply_state_transfer(*copies, coded_states(*from, 2), *to, 2, 7);
      check_coded(*to, moved, 2);
      for (const auto& s : moved) CHECK(s.steps == 7);
    }
}

TEST_CASE("a transfer between different models is refused, naming the parameter") {
  const model_fn wider = [](graph& g, std::int64_t b) { return apps::build_mlp(g, {24, 40, 30, 10}, b).loss; };
  auto from = piece_layouts(*compiled(mlp, {.dp = 2}));
  auto to = piece_layouts(*compiled(wider, {.dp = 2}));
  auto copies = plan_state_transfer(*from, *to);
  REQUIRE(!copies.ok());
  CHECK(copies.error().code == errc::shape_mismatch);
  CHECK(copies.error().message.find("fc1.weight") != std::string::npos);
  auto gpt_to = piece_layouts(*compiled(gpt, {}));
  auto none = plan_state_transfer(*from, *gpt_to);
  REQUIRE(!none.ok());
  CHECK(none.error().message.find("has no parameter") != std::string::npos);
}

TEST_CASE("the exchange across processes fills each process's new pieces as the transfer in one process does") {
  // 2 processes, each its own thread over one in-process fabric of the old plan's ranks
  for (const auto& c : cases()) {
    if (c.from.ranks() % 2 != 0 || c.to.ranks() % 2 != 0) continue;
    const std::string pair = c.name;
    CAPTURE(pair);
    auto old_model = compiled(gpt, c.from), new_model = compiled(gpt, c.to);
    auto from = *piece_layouts(*old_model);
    auto to = *piece_layouts(*new_model);
    auto copies = *plan_state_transfer(from, to);
    auto all = coded_states(from, 1);
    exchange_options o;
    o.old_owner = planner::rank_layout(c.from).process_of_rank(2);
    o.new_owner = planner::rank_layout(c.to).process_of_rank(2);
    o.processes = 2;
    o.slots = 1;
    o.steps = 3;
    o.tag = 99;
    o.timeout = std::chrono::milliseconds(20000);
    auto got = exchange_between_two(o, c.from.ranks(), copies, all, to);
    for (int p = 0; p < 2; ++p) {
      REQUIRE_MESSAGE(got[static_cast<std::size_t>(p)].ok(), got[static_cast<std::size_t>(p)].error().message);
      const auto& states = got[static_cast<std::size_t>(p)]->states;
      for (std::size_t r = 0; r < to.size(); ++r) CHECK(states[r].values.defined() == (o.new_owner[r] == p));
      check_coded(to, states, 1);
    }
    CHECK(bytes_across_processes(copies, o) <= transfer_bytes(copies, 1));
  }
}

TEST_CASE("an exchange message of the wrong size is refused") {
  auto from = *piece_layouts(*compiled(mlp, {.dp = 2}));
  auto to = *piece_layouts(*compiled(mlp, {.dp = 2, .shard_params = true}));
  auto copies = *plan_state_transfer(from, to);
  transport::in_process_fabric fabric(2);
  exchange_options o;
  o.old_owner = {0, 1};
  o.new_owner = {0, 1};
  o.processes = 2;
  o.process = 1;
  o.tag = 5;
  o.timeout = std::chrono::milliseconds(20000);
  // process 0 sends a short message where the plans need rank 1's new piece from rank 0
  REQUIRE(fabric.endpoint(0).send(1, 5, tensor::zeros({3}), o.timeout).ok());
  auto got = exchange_state(fabric, o, copies, coded_states(from, 0), to);
  REQUIRE(!got.ok());
  CHECK(got.error().code == errc::io_error);
  CHECK(got.error().message.find("process 0 sent 3 values") != std::string::npos);
}

TEST_CASE("the parameter actors a transition keeps: the same pieces on the same process") {
  struct keep_case {
    const char* name;
    parallel_plan from, to;
    int processes;
    std::vector<int> kept;
  };
  const std::vector<keep_case> keep_cases = {
      {"dp2 -> dp4 in one process", {.dp = 2}, {.dp = 4}, 1, {0, 1, -1, -1}},
      // process 0 has old rank 0 and new ranks 0, 1; process 1 old rank 1 and new ranks 2, 3
      {"dp2 -> dp4 over 2 processes", {.dp = 2}, {.dp = 4}, 2, {0, -1, 1, -1}},
      {"only the micro-batches change",
       {.dp = 2, .tp = 2, .micro_batches = 2},
       {.dp = 2, .tp = 2, .micro_batches = 4},
       2,
       {0, 1, 2, 3}},
      {"dp2 -> dp2 sharded", {.dp = 2}, {.dp = 2, .shard_params = true}, 1, {-1, -1}},
      {"dp2 sharded -> tp2 pp2 m4",
       {.dp = 2, .shard_params = true},
       {.tp = 2, .pp = 2, .micro_batches = 4},
       1,
       {-1, -1, -1, -1}},
      {"dp4 -> dp2 in one process", {.dp = 4}, {.dp = 2}, 1, {0, 1}}};
  for (const auto& c : keep_cases) {
    const std::string pair = c.name;
    CAPTURE(pair);
    auto from = *piece_layouts(*compiled(gpt, c.from));
    auto to = *piece_layouts(*compiled(gpt, c.to));
    const auto old_owner = planner::rank_layout(c.from).process_of_rank(c.processes);
    const auto new_owner = planner::rank_layout(c.to).process_of_rank(c.processes);
    const auto kept = kept_pieces(from, to, old_owner, new_owner);
    CHECK(kept == c.kept);
    auto copies = without_kept(*plan_state_transfer(from, to), kept);
    for (const auto& k : copies) CHECK(kept[static_cast<std::size_t>(k.to_rank)] < 0);
    // the others are filled exactly; the kept ones are left to their actors
    auto moved = apply_state_transfer(copies, coded_states(from, 1), to, 1, 4, kept);
    for (std::size_t r = 0; r < to.size(); ++r) CHECK(moved[r].values.defined() == (kept[r] < 0));
    check_coded(to, moved, 1);
    if (c.processes == 1) continue;
    // across processes the exchange leaves the same ranks empty
    exchange_options o;
    o.old_owner = old_owner, o.new_owner = new_owner, o.kept = kept;
    o.processes = 2, o.slots = 1, o.steps = 4, o.tag = 98, o.timeout = std::chrono::milliseconds(20000);
    auto got = exchange_between_two(o, c.from.ranks(), copies, coded_states(from, 1), to);
    for (int p = 0; p < 2; ++p) {
      REQUIRE(got[static_cast<std::size_t>(p)].ok());
      const auto& states = got[static_cast<std::size_t>(p)]->states;
      for (std::size_t r = 0; r < to.size(); ++r)
        CHECK(states[r].values.defined() == (new_owner[r] == p && kept[r] < 0));
      check_coded(to, states, 1);
    }
  }
}
