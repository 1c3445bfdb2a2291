// The embedding tables' placement over tensor-parallel ranks (planner/table_placement.hpp):
// what the cost function chooses where one term clearly dominates (memory, the exchange's
// latency, the lookups' work), that what it returns fits what it says, and its explanations.
#include "planner/table_placement.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

using namespace cohort;
using namespace cohort::planner;

namespace {

table_request request(int tp, int tables, std::int64_t rows) {
  table_request r;
  for (int i = 0; i < tables; ++i) r.tables.push_back({"emb." + std::to_string(i), rows, 16, 4096});
  r.tp = tp;
  r.pooled_rows = 4096;
  r.memory_per_rank_bytes = 1e12;
  r.lookup_bytes_per_s = 1e9;
  r.update_bytes_per_s = 1e9;
  r.link = {1e12, 0};
  r.rates_source = "test";
  return r;
}

int count(const table_plan& p, table_sharding how) {
  return static_cast<int>(std::count_if(p.tables.begin(), p.tables.end(), [&](auto& c) { return c.how == how; }));
}

}  // namespace

TEST_CASE("one tensor-parallel rank: every table replicated, and it fits") {
  auto p = place_tables(request(1, 3, 1000));
  REQUIRE(p.ok());
  CHECK(count(*p, table_sharding::replicated) == 3);
  CHECK(p->fits);
  CHECK(p->rank_bytes.size() == 1);
  CHECK(p->rank_bytes[0] == doctest::Approx(3 * 1000 * 16 * 4.0));
}

TEST_CASE("a slow link's latency keeps the tables replicated where memory allows") {
  table_request r = request(2, 4, 1000);
  r.link = {1e9, 1e-2};  // 10 ms per exchange round: far above any lookup here
  auto p = place_tables(r);
  REQUIRE(p.ok());
  CHECK(count(*p, table_sharding::replicated) == 4);
  CHECK(p->exchange_seconds == 0);
}

TEST_CASE("a free link spreads the lookups: the busiest rank does half the work of replicating") {
  table_request r = request(2, 6, 1000);
  auto p = place_tables(r);
  REQUIRE(p.ok());
  CHECK(count(*p, table_sharding::replicated) == 0);
  table_request one = request(1, 6, 1000);
  auto whole = place_tables(one);
  REQUIRE(whole.ok());
  const double busiest = *std::max_element(p->rank_seconds.begin(), p->rank_seconds.end());
  CHECK(busiest == doctest::Approx(whole->rank_seconds[0] / 2).epsilon(0.01));
}

TEST_CASE("tables larger than a rank's memory are split, and every rank's bytes stay within it") {
  table_request r = request(2, 3, 1'000'000);  // 64 MB each with no optimizer state
  r.optimizer_slots = 1;                       // 128 MB each with Adagrad's sums
  r.link = {1e9, 1e-2};                        // replication would be preferred were there room
  r.memory_per_rank_bytes = 250e6;             // two whole tables do not fit one rank
  auto p = place_tables(r);
  REQUIRE(p.ok());
  CHECK(p->fits);
  CHECK(count(*p, table_sharding::replicated) <= 1);
  for (double b : p->rank_bytes) CHECK(b <= r.memory_per_rank_bytes);
  CHECK(explain(r, *p).find("of 0.25 GB") != std::string::npos);
}

TEST_CASE("a table-wise table names its rank, and a table of one row cannot be split by rows") {
  table_request r = request(3, 1, 1);
  r.tables[0].dim = 2;  // fewer columns than ranks: neither row- nor column-wise
  r.link = {1e12, 0};
  auto p = place_tables(r);
  REQUIRE(p.ok());
  CHECK((p->tables[0].how == table_sharding::table || p->tables[0].how == table_sharding::replicated));
  if (p->tables[0].how == table_sharding::table) CHECK((p->tables[0].owner >= 0 && p->tables[0].owner < 3));
}

TEST_CASE("when nothing fits the answer says what would") {
  table_request r = request(2, 4, 10'000'000);  // 640 MB each, 2.56 GB in all
  r.memory_per_rank_bytes = 500e6;              // 1 GB on two ranks
  auto p = place_tables(r);
  REQUIRE(p.ok());
  CHECK_FALSE(p->fits);
  CHECK(p->what_would_fit.find("emb.1 fits on no rank") == 0);  // emb.0 row-wise takes half of each rank
  CHECK(p->what_would_fit.find("--plan.tp=6 or more ranks of this memory, or 1.28 GB per rank at tp 2") !=
        std::string::npos);
  CHECK(explain(r, *p).find("what would") == std::string::npos);  // the explanation holds the sentence itself
  CHECK(explain(r, *p).find("--plan.tp=6") != std::string::npos);
}

TEST_CASE("bad table placement requests are errors naming what is wrong") {
  table_request r = request(2, 1, 100);
  r.tables[0].rows = 0;
  CHECK(place_tables(r).error().message.find("table 'emb.0' needs positive rows") != std::string::npos);
  r = request(0, 1, 100);
  CHECK(place_tables(r).error().message == "table placement: tp must be at least 1");
  r = request(2, 1, 100);
  r.lookup_bytes_per_s = 0;
  CHECK(place_tables(r).error().message == "table placement: the lookup and update rates must be positive");
  r = request(2, 1, 100);
  r.memory_per_rank_bytes = 0;
  CHECK(place_tables(r).error().message == "table placement: memory_per_rank_bytes must be positive");
}
