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

TEST_CASE("the rates at a table's size: interpolated in log size between the measured sizes") {
  const std::vector<table_rate> measured{{1e6, 4e9, 2e9}, {1e8, 1e9, 1e9}};
  const table_rate whole{0, 3e9, 3e9};
  const table_rate mid = rates_at(measured, 1e7, whole);  // halfway in log size
  CHECK(mid.lookup_bytes_per_s == doctest::Approx(1.0 / (0.5 / 4e9 + 0.5 / 1e9)).epsilon(1e-12));  // 1.6e9
  CHECK(mid.update_bytes_per_s == doctest::Approx(1.0 / (0.5 / 2e9 + 0.5 / 1e9)).epsilon(1e-12));  // 1.33e9
  CHECK(rates_at(measured, 5e5, whole).lookup_bytes_per_s == 4e9);  // below the smallest: its rates
  CHECK(rates_at(measured, 1e9, whole).update_bytes_per_s == 1e9);  // beyond the largest: its rates
  CHECK(rates_at({}, 1e9, whole).lookup_bytes_per_s == 3e9);        // none measured: the one rate
  table_request r = request(1, 1, 1000);                            // 64 kB: at the smallest size's rates
  r.rates_by_size = measured;
  auto p = place_tables(r);
  REQUIRE(p.ok());
  CHECK(p->rank_seconds[0] == doctest::Approx(4096.0 * 64 * (1 / 4e9 + 1 / 2e9)).epsilon(1e-12));
  r.rates_by_size = {{1e6, 4e9, 2e9}, {1e6, 1e9, 1e9}};
  auto bad = place_tables(r);
  REQUIRE(!bad);
  CHECK(bad.error().message == "table placement: rates_by_size[1]: the sizes must ascend");
}

TEST_CASE("a row shard is priced at its own size: halving a table out of memory can make row-wise pay") {
  // one 100 MB table over 2 ranks; replicated, each rank reads it all at the 100 MB rate; row-wise,
  // each reads half the ids from its 50 MB half, a little faster, and pays one exchange of the
  // pooled rows, set between the two: only the size-aware price finds that row-wise pays
  table_request r = request(2, 1, 1'562'500);
  r.tables[0].ids_per_step = 1e5;
  r.pooled_rows = 1e5;
  r.link = {6.4e6 / 6.8e-3, 0};  // the exchange: 6.8 ms
  auto flat = place_tables(r);
  REQUIRE(flat.ok());
  CHECK(flat->tables[0].how == table_sharding::replicated);  // 12.8 ms against 6.4 + 6.8
  r.rates_by_size = {{1e6, 8e9, 8e9}, {1e8, 1e9, 1e9}};
  auto sized = place_tables(r);
  REQUIRE(sized.ok());
  CHECK(sized->tables[0].how == table_sharding::row);  // 5.56 + 6.8 ms against 12.8
  CHECK(sized->step_seconds < flat->step_seconds);
  CHECK(explain(r, *sized).find("rates: by a piece's size: lookup 8.00 GB/s (1 MB) to 1.00 GB/s (100 MB)") !=
        std::string::npos);
}
