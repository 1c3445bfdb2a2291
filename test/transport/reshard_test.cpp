// Reshard: every pair of placement kinds (R, S(0), S(1), P), on meshes of the same and of
// different shapes and sizes (2 -> 3 ranks, a 2x2 mesh -> 3 ranks, 3 -> 2x2), executed with
// the ranks as threads; every destination piece must hold exactly its box of the tensor.
#include <doctest/doctest.h>

#include <algorithm>

#include "graph/reshard.hpp"
#include "support/spawn_ranks.hpp"
#include "transport/in_process.hpp"
#include "transport/reshard.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace std::chrono_literals;

namespace {

const shape global{6, 5};

float value_at(std::int64_t i, std::int64_t j) { return static_cast<float>(10 * i + j + 1); }

tensor box_of_global(const box& b) {
  tensor t = tensor::empty(b.extent());
  std::int64_t k = 0;
  for (std::int64_t i = b.dims[0].begin; i < b.dims[0].end; ++i)
    for (std::int64_t j = b.dims[1].begin; j < b.dims[1].end; ++j) t.data<float>()[k++] = value_at(i, j);
  return t;
}

// A source rank's piece: its box of the tensor, or for a Partial layout an addend of it
// (small integers everywhere, so every sum is exact in float).
tensor source_piece(const layout& l, int mesh_rank) {
  box b = local_box(global, l, mesh_rank);
  tensor t = box_of_global(b);
  bool any_partial =
      std::any_of(l.placements.begin(), l.placements.end(), [](const placement& p) { return is_partial(p); });
  if (!any_partial) return t;
  // ranks off coordinate 0 of the partial axes hold (rank + 1); the one at 0 holds the rest
  int partial_peers = 1;
  for (int a = 0; a < l.mesh.axis_count(); ++a)
    if (is_partial(l.placements[static_cast<std::size_t>(a)])) partial_peers *= static_cast<int>(l.mesh.axis_size(a));
  if (!holds_partial_value(l, mesh_rank)) {
    t.fill(static_cast<float>(mesh_rank + 1));
    return t;
  }
  // subtract what the other partial peers of the same box hold
  for (int other = 0; other < l.mesh.rank_count(); ++other) {
    if (other == mesh_rank || holds_partial_value(l, other)) continue;
    box ob = local_box(global, l, other);
    if (ob.dims[0].begin != b.dims[0].begin || ob.dims[1].begin != b.dims[1].begin) continue;
    bool same_replica = true;  // only peers that differ on partial axes alone
    auto c1 = l.mesh.coordinates(mesh_rank), c2 = l.mesh.coordinates(other);
    for (int a = 0; a < l.mesh.axis_count(); ++a)
      if (!is_partial(l.placements[static_cast<std::size_t>(a)]) &&
          c1[static_cast<std::size_t>(a)] != c2[static_cast<std::size_t>(a)])
        same_replica = false;
    if (!same_replica) continue;
    for (std::int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] -= static_cast<float>(other + 1);
  }
  (void)partial_peers;
  return t;
}

std::string describe(const layout& l) {
  std::string out = l.mesh.to_string() + "[";
  for (std::size_t i = 0; i < l.placements.size(); ++i) out += (i ? "," : "") + to_string(l.placements[i]);
  return out + "]";
}

void check_reshard(const layout& from, const layout& to) {
  CAPTURE(describe(from) + " -> " + describe(to));
  auto plan = plan_reshard(global, from, to);
  REQUIRE_MESSAGE(plan.ok(), plan.error().message);
  int world = 0;
  for (int r = 0; r < from.mesh.rank_count(); ++r) world = std::max(world, from.global_rank(r) + 1);
  for (int r = 0; r < to.mesh.rank_count(); ++r) world = std::max(world, to.global_rank(r) + 1);
  in_process_fabric fabric(world);
  std::vector<tensor> outputs(static_cast<std::size_t>(world));
  auto results = cohort::test::spawn_ranks(world, [&](int g) -> status {
    tensor in, out;
    for (int r = 0; r < from.mesh.rank_count(); ++r)
      if (from.global_rank(r) == g) in = source_piece(from, r);
    for (int r = 0; r < to.mesh.rank_count(); ++r)
      if (to.global_rank(r) == g) out = tensor::empty(local_box(global, to, r).extent());
    auto st = execute_reshard(fabric.endpoint(g), *plan, in.defined() ? &in : nullptr, out.defined() ? &out : nullptr,
                              {.tag = 77, .timeout = 5000ms});
    outputs[static_cast<std::size_t>(g)] = out;
    return st;
  });
  for (auto& st : results) REQUIRE_MESSAGE(st.ok(), st.error().message);
  for (int r = 0; r < to.mesh.rank_count(); ++r) {
    CAPTURE(r);
    const tensor& got = outputs[static_cast<std::size_t>(to.global_rank(r))];
    tensor expected = box_of_global(local_box(global, to, r));
    if (!holds_partial_value(to, r)) expected.fill(0.f);
    CHECK(got.to_vector() == expected.to_vector());
  }
}

const placement kinds[] = {replicate{}, shard{0}, shard{1}, partial{}};

}  // namespace

TEST_CASE("every pair of placement kinds on one mesh, and from 2 ranks to 3 other ranks") {
  for (const auto& a : kinds)
    for (const auto& b : kinds) {
      check_reshard({process_mesh({{"x", 2}}), {a}, {}}, {process_mesh({{"x", 2}}), {b}, {}});
      check_reshard({process_mesh({{"x", 2}}), {a}, {0, 1}}, {process_mesh({{"x", 3}}), {b}, {2, 3, 4}});
      check_reshard({process_mesh({{"x", 3}}), {a}, {}}, {process_mesh({{"x", 2}}), {b}, {1, 2}});
    }
}

TEST_CASE("between meshes of different shapes: 2x2 to 3 ranks and 3 to 2x2") {
  const placement two_d[][2] = {{shard{0}, partial{}}, {replicate{}, shard{1}},  {shard{0}, shard{1}},
                                {shard{1}, shard{1}},  {partial{}, replicate{}}, {shard{0}, shard{0}}};
  for (const auto& p : two_d)
    for (const auto& b : kinds) {
      check_reshard({process_mesh({{"x", 2}, {"y", 2}}), {p[0], p[1]}, {}}, {process_mesh({{"x", 3}}), {b}, {}});
      check_reshard({process_mesh({{"x", 3}}), {b}, {}}, {process_mesh({{"x", 2}, {"y", 2}}), {p[0], p[1]}, {}});
    }
}

TEST_CASE("a reshard plan only moves what has to move") {
  // S(0) -> S(0) on the same mesh: each rank keeps its own piece, nothing crosses
  auto same =
      plan_reshard(global, {process_mesh({{"x", 3}}), {shard{0}}, {}}, {process_mesh({{"x", 3}}), {shard{0}}, {}});
  REQUIRE(same.ok());
  for (const auto& m : same->messages) CHECK(m.from == m.to);
  // R -> S: only rank 0's copy is read
  auto slice =
      plan_reshard(global, {process_mesh({{"x", 2}}), {replicate{}}, {}}, {process_mesh({{"x", 2}}), {shard{1}}, {}});
  REQUIRE(slice.ok());
  for (const auto& m : slice->messages) CHECK(m.from == 0);
}

TEST_CASE("reshard layout errors") {
  CHECK(plan_reshard(global, {process_mesh({{"x", 2}}), {}, {}}, {process_mesh({{"x", 2}}), {replicate{}}, {}})
            .error()
            .message == "reshard: source layout has 0 placements for mesh {x:2}");
  CHECK(plan_reshard(global, {process_mesh({{"x", 2}}), {shard{2}}, {}}, {process_mesh({{"x", 2}}), {replicate{}}, {}})
            .error()
            .message == "reshard: source shards dimension 2 of [6,5]");
}
