// Where a recommender's embedding tables live on the tensor-parallel ranks: for each table,
// replicated, column-wise, row-wise or table-wise (whole on one rank), chosen from a cost
// function over what each rank holds and does per step — the bytes of its tables and their
// optimizer state against its memory, the rows it looks up and updates at the calibrated
// rates (machine_profile::table_rates at the size of each rank's piece of the table, else
// lookup_bytes_per_s and sparse_update_bytes_per_s), and the exchange of
// pooled outputs between the ranks over the link. The busiest rank's seconds plus the
// exchanges' are minimised; every choice is explained, and when no choice fits the ranks'
// memory, the answer says what would.
//
//   table_request r;
//   r.tables = {{"emb.c1", 1460, 16, 128}, {"emb.c3", 10'131'227, 16, 128}};   // rows, dim, ids per step
//   r.tp = 2;
//   r.pooled_rows = 128;                          // a replica's batch rows (one pooled row each)
//   r.memory_per_rank_bytes = 4e9;
//   r.lookup_bytes_per_s = 1.5e9, r.update_bytes_per_s = 1e9;
//   r.link = {5e9, 10e-6};
//   auto plan = place_tables(r);
//   if (!plan) return plan.error();             // bad input, naming the field
//   std::cout << explain(r, *plan);             // a line per choice, the ranks' loads; or what would fit
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/error.hpp"
#include "graph/layers.hpp"
#include "planner/cluster.hpp"

namespace cohort::planner {

struct table_spec {
  std::string name;
  std::int64_t rows = 0, dim = 0;
  double ids_per_step = 0;  // ids one data-parallel replica looks up in it per step (rows x bag)
};

/// The embedding path's rates for a table of `table_bytes` (a table in the caches pools its
/// rows far faster than one in memory): one core's bytes of rows looked up and updated per second.
struct table_rate {
  double table_bytes = 0, lookup_bytes_per_s = 0, update_bytes_per_s = 0;
};

/// The rates for a table of `bytes`: `by_size` (ascending table_bytes) read at that size —
/// seconds per byte interpolated linearly in log(size) between the two sizes around it, the
/// nearest size's beyond either end; `whole` (the scalar rates) when `by_size` is empty.
table_rate rates_at(const std::vector<table_rate>& by_size, double bytes, const table_rate& whole);

/// What is wrong with rates by size ("[i]: ..." naming the first bad entry), or "": every size
/// and rate positive and finite, the sizes ascending.
std::string table_rates_problem(const std::vector<table_rate>& by_size);

struct table_request {
  std::vector<table_spec> tables;
  int tp = 1;
  double pooled_rows = 1;            // rows of one replica's batch: one pooled output row each per table
  double memory_per_rank_bytes = 0;  // what a rank may give its tables and their optimizer state
  int optimizer_slots = 0;           // state values per parameter (Adagrad 1, SGD 0)
  double lookup_bytes_per_s = 0;     // one rank's rates, in bytes of rows
  double update_bytes_per_s = 0;
  std::vector<table_rate> rates_by_size;  // when measured: each rank's piece priced at its size
  link_cost link;                         // between the tensor-parallel ranks
  std::string rates_source;               // "calibrated", or how they were estimated (said in explain)
};

struct table_choice {
  table_sharding how = table_sharding::replicated;
  int owner = -1;  // table-wise: the rank that holds it
};

struct table_plan {
  std::vector<table_choice> tables;  // by request.tables' order
  std::vector<double> rank_bytes;    // per rank: its tables and their optimizer state
  std::vector<double> rank_seconds;  // per rank: lookups and updates per step
  double exchange_seconds = 0;       // the pooled outputs' exchanges per step
  double step_seconds = 0;           // the busiest rank's plus the exchanges'
  bool fits = true;
  std::string what_would_fit;  // when !fits
};

/// The choice for every table. Errors (exit 2 at the app): tp < 1, a table with no rows or
/// dimension, non-positive rates or memory. A request where nothing fits is not an error:
/// fits = false and what_would_fit says what would (more ranks, row-wise, more memory).
result<table_plan> place_tables(const table_request& r);

/// A line per table kind with the tables it took (and each table-wise table's rank), the
/// ranks' bytes and seconds, the rates and their source; or why nothing fits and what would.
std::string explain(const table_request& r, const table_plan& p);

}  // namespace cohort::planner
