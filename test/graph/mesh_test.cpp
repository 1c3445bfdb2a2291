// Process meshes and placements: coordinates, groups, near-equal shard ranges.
#include <doctest/doctest.h>

#include "graph/mesh.hpp"
#include "graph/placement.hpp"

using namespace cohort;

TEST_CASE("ranks are row-major over the axes, the last axis fastest") {
  process_mesh m({{"dp", 2}, {"pp", 2}, {"tp", 2}});
  CHECK(m.rank_count() == 8);
  CHECK(m.coordinates(5) == std::vector<std::int64_t>{1, 0, 1});
  CHECK(m.coordinate(5, "tp") == 1);
  CHECK(m.rank_at({1, 1, 0}) == 6);
  CHECK(m.group(5, "dp") == std::vector<int>{1, 5});
  CHECK(m.group(5, "pp") == std::vector<int>{5, 7});
  CHECK(m.group(5, "tp") == std::vector<int>{4, 5});
  CHECK(m.size_of("tp") == 2);
  CHECK(m.size_of("ep") == 1);
  CHECK(m.to_string() == "{dp:2,pp:2,tp:2}");
}

TEST_CASE("mesh validation") {
  CHECK(make_mesh({{"dp", 2}, {"dp", 2}}).error().message == "mesh: axis 'dp' appears twice");
  CHECK(make_mesh({{"tp", 0}}).error().message == "mesh: axis 'tp' has size 0");
  CHECK(make_mesh({{"", 2}}).error().message == "mesh: an axis has no name");
  CHECK(make_mesh({{"dp", 3}, {"tp", 1}})->rank_count() == 3);
}

TEST_CASE("shards of an extent that does not divide are near-equal, larger first") {
  CHECK(shard_range(10, 3, 0) == range{0, 4});
  CHECK(shard_range(10, 3, 1) == range{4, 7});
  CHECK(shard_range(10, 3, 2) == range{7, 10});
  CHECK(shard_range(2, 3, 2) == range{2, 2});          // more parts than elements: empty shard
  CHECK(shard_range(256, 3, 0, 64) == range{0, 128});  // 4 heads over 3: 2, 1, 1
  CHECK(shard_range(256, 3, 2, 64) == range{192, 256});
  std::int64_t covered = 0;
  for (int i = 0; i < 7; ++i) covered += shard_range(1000, 7, i).size();
  CHECK(covered == 1000);
}

TEST_CASE("a shard with an owner holds the whole extent on that part and nothing elsewhere") {
  const shard whole_on_1{0, 1, 1};
  CHECK(shard_part(whole_on_1, 11, 3, 1) == range{0, 11});
  CHECK(shard_part(whole_on_1, 11, 3, 0) == range{0, 0});
  CHECK(shard_part(whole_on_1, 11, 3, 2) == range{0, 0});
  CHECK(shard_part(shard{0}, 11, 3, 2) == shard_range(11, 3, 2));  // no owner: near-equal parts
  CHECK(shard_part(shard{0, 64}, 256, 3, 1) == range{128, 192});
}

TEST_CASE("placement names") {
  CHECK(to_string(placement{replicate{}}) == "R");
  CHECK(to_string(placement{shard{1}}) == "S(1)");
  CHECK(to_string(placement{shard{2, 64}}) == "S(2/64)");
  CHECK(to_string(placement{shard{0, 1, 2}}) == "S(0@2)");
  CHECK(to_string(placement{shard{0, 1, shard::one_part}}) == "S(0@?)");
  CHECK(to_string(placement{partial{}}) == "P");
}
