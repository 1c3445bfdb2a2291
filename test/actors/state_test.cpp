// The actors' state structs, without a scheduler: the data actor's micro-batch slicing and
// the parameter actor's attach / submit / commit / rollback protocol with generations.
#include <doctest/doctest.h>

#include "actors/data_actor.hpp"
#include "actors/param_actor.hpp"

using namespace cohort;
using namespace cohort::actors;

TEST_CASE("the data actor computes a step's batch once and hands out each replica's rows") {
  int calls = 0;
  data_state s;
  s.source = [&](std::int64_t step) -> result<std::map<std::string, tensor>> {
    ++calls;
    tensor x = tensor::empty({8, 2});
    for (int i = 0; i < 16; ++i) x.data<float>()[i] = static_cast<float>(100 * step + i);
    return std::map<std::string, tensor>{{"x", x}};
  };
  s.configure({.dp = 2, .micro_batches = 2, .batch = 8});
  auto mb = s.replica_rows(3, 1);  // replica 1: its two micro-batches, rows 4..7
  REQUIRE(mb.ok());
  CHECK(mb->inputs.at("x").shape() == shape{4, 2});
  CHECK(mb->inputs.at("x").to_vector() == std::vector<float>{308, 309, 310, 311, 312, 313, 314, 315});
  REQUIRE(s.replica_rows(3, 0).ok());
  CHECK(s.replica_rows(3, 0)->inputs.at("x").to_vector() == std::vector<float>{300, 301, 302, 303, 304, 305, 306, 307});
  CHECK(calls == 1);  // the same step is not recomputed
  REQUIRE(s.replica_rows(4, 0).ok());
  CHECK(calls == 2);
  REQUIRE(s.prepare(5).ok());  // what the actor does ahead of time
  REQUIRE(s.replica_rows(5, 1).ok());
  CHECK(calls == 3);
  REQUIRE(s.replica_rows(4, 1).ok());  // a redone step finds its batch
  CHECK(calls == 3);
  CHECK(s.replica_rows(4, 2).error().message == "data: no replica 2");
  s.configure({.dp = 2, .micro_batches = 2, .batch = 12});  // a batch the source does not give
  CHECK(s.replica_rows(6, 0).error().message == "data: input 'x' has batch [8,2], the plan splits 12 rows");
}

TEST_CASE("the data actor hands out a replica's near-equal share of a batch that splits unevenly") {
  data_state s;
  s.source = [&](std::int64_t) -> result<std::map<std::string, tensor>> {
    tensor x = tensor::empty({8, 1});
    for (int i = 0; i < 8; ++i) x.data<float>()[i] = static_cast<float>(i);
    return std::map<std::string, tensor>{{"x", x}};
  };
  s.configure({.dp = 3, .micro_batches = 1, .batch = 8});  // 8 rows over 3 replicas: 3 3 2
  const std::vector<std::vector<float>> shares{{0, 1, 2}, {3, 4, 5}, {6, 7}};
  for (int replica = 0; replica < 3; ++replica) {
    auto mb = s.replica_rows(0, replica);
    REQUIRE(mb.ok());
    CHECK(mb->inputs.at("x").to_vector() == shares[static_cast<std::size_t>(replica)]);
  }
}

TEST_CASE("a step whose batch changed takes the samples after the last step's, across the source's batches") {
  std::vector<std::int64_t> asked;
  data_state s;
  s.source = [&](std::int64_t k) -> result<std::map<std::string, tensor>> {  // source batch k: 100 k + row
    asked.push_back(k);
    tensor x = tensor::empty({8, 1});
    for (int i = 0; i < 8; ++i) x.data<float>()[i] = static_cast<float>(100 * k + i);
    return std::map<std::string, tensor>{{"x", x}};
  };
  s.configure({.dp = 2, .micro_batches = 1, .batch = 8, .source_rows = 8});
  REQUIRE(s.replica_rows(1, 1).ok());  // steps 0 and 1: source batches 0 and 1
  // after step 1 the plan grows to dp3 under --elastic.batch=scale: 12 samples a step from 16 on
  s.configure({.dp = 3, .micro_batches = 1, .batch = 12, .source_rows = 8, .from_step = 2, .from_sample = 16});
  auto r0 = s.replica_rows(2, 0), r2 = s.replica_rows(2, 2);
  REQUIRE((r0.ok() && r2.ok()));
  CHECK(r0->inputs.at("x").to_vector() == std::vector<float>{200, 201, 202, 203});
  CHECK(r2->inputs.at("x").to_vector() == std::vector<float>{300, 301, 302, 303});
  auto next = s.replica_rows(3, 0);  // samples 28..39: the rest of batch 3, then batch 4
  REQUIRE(next.ok());
  CHECK(next->inputs.at("x").to_vector() == std::vector<float>{304, 305, 306, 307});
  CHECK(s.replica_rows(3, 2)->inputs.at("x").to_vector() == std::vector<float>{404, 405, 406, 407});
  CHECK(asked == std::vector<std::int64_t>{1, 2, 3, 4});  // each source batch read once
  // the cursor the coordinator keeps agrees, and a job rolled back forgets the later stretches
  data_cursor c;
  c.begin({.step = 0, .sample = 0, .rows = 8});
  c.begin({.step = 2, .sample = c.first_sample(2), .rows = 12});
  CHECK(c.first_sample(3) == 28);
  c.begin({.step = 5, .sample = c.first_sample(5), .rows = 4});
  CHECK(c.first_sample(6) == 16 + 3 * 12 + 4);
  c.begin({.step = 1, .sample = c.first_sample(1), .rows = 8});  // back to step 1, the batch of 8
  CHECK(c.stretches().size() == 2);
  CHECK(c.first_sample(3) == 24);
  CHECK(c.at(3).rows == 8);
}

TEST_CASE("a parameter piece applies a gradient only once its step is committed, and drops it on rollback") {
  parameter_piece s(sgd_config{.lr = 0.5f});
  tensor worker_params = tensor::full({3}, 1.f);
  REQUIRE(s.attach(worker_params).ok());
  REQUIRE(s.submit(0, 0, tensor::full({3}, 2.f)).ok());
  REQUIRE(s.apply_committed(-1).ok());  // step 0 not committed yet: nothing happens
  CHECK(worker_params.at(0) == 1.f);
  REQUIRE(s.apply_committed(0).ok());
  CHECK(worker_params.at(0) == 0.f);   // 1 - 0.5 * 2, in the worker's own storage
  REQUIRE(s.apply_committed(0).ok());  // exactly once
  CHECK(worker_params.at(0) == 0.f);
  // a failed step: its gradient waits, the generation ends uncommitted, nothing is applied
  REQUIRE(s.submit(0, 1, tensor::full({3}, 2.f)).ok());
  REQUIRE(s.rollback(1, /*committed=*/0).ok());
  REQUIRE(s.apply_committed(1).ok());
  CHECK(worker_params.at(0) == 0.f);
  // a late gradient from the old generation is refused
  CHECK(s.submit(0, 1, tensor::full({3}, 2.f)).error().message ==
        "parameters: gradient from generation 0, now 1 (ignored)");
  // a respawned worker attaches new storage and is refilled with the current values
  tensor fresh = tensor::full({3}, 42.f);
  REQUIRE(s.attach(fresh).ok());
  CHECK(fresh.to_vector() == std::vector<float>{0.f, 0.f, 0.f});
  REQUIRE(s.submit(1, 1, tensor::full({3}, -2.f)).ok());
  // a committed gradient still waiting when recovery comes is applied, not lost
  REQUIRE(s.rollback(2, /*committed=*/1).ok());
  CHECK(fresh.at(2) == 1.f);
  CHECK(s.updates() == 2);
  auto copy = s.fetch(1);
  REQUIRE(copy.ok());
  CHECK(copy->to_vector() == std::vector<float>{1.f, 1.f, 1.f});
}

TEST_CASE("a piece spawned with a state reads that state until its worker attaches") {
  // a re-plan may follow a recovery before the recovered plan's workers have attached: the
  // transition exports the pieces as spawned (this was the job's "nothing attached" failure)
  piece_state initial;
  const std::vector<float> values{1.f, 2.f, 3.f}, slot(3, 0.5f);
  initial.values = tensor::from({3}, values);
  initial.slots = {tensor::from({3}, slot)};
  initial.steps = 7;
  parameter_piece s(sgd_config{.lr = 0.5f}, initial, /*generation=*/3);
  CHECK(s.holds_values());
  CHECK(s.size() == 3);
  CHECK(s.updates() == 7);
  auto exported = s.export_state(/*committed=*/6);
  REQUIRE(exported.ok());
  CHECK(exported->values.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  REQUIRE(exported->slots.size() == 1);
  CHECK(exported->slots[0].to_vector() == std::vector<float>{0.5f, 0.5f, 0.5f});
  CHECK(exported->steps == 7);
  exported->values.data<float>()[0] = 99.f;  // a copy: the piece's own state is untouched
  auto snap = s.snapshot();
  REQUIRE(snap.ok());
  CHECK(snap->values.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  auto fetched = s.fetch(6);
  REQUIRE(fetched.ok());
  CHECK(fetched->to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  // then the worker attaches and the piece is its storage
  tensor storage = tensor::zeros({3});
  REQUIRE(s.attach(storage).ok());
  CHECK(storage.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(s.updates() == 7);
  // a piece spawned with nothing still refuses
  parameter_piece empty(sgd_config{.lr = 0.5f});
  CHECK(!empty.holds_values());
  CHECK(empty.export_state(0).error().message == "parameters: nothing attached");
}
