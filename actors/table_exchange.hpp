// How data-parallel replicas share their embedding tables' sparse updates (--exec.mode):
// `sync` gathers every replica's touched rows in every step, so every lookup sees every
// earlier update (the serial program's losses); `async` with staleness S applies a step's
// gathered table entries S steps after its dense update (the parameter server's stale
// tables, bounded and enforced: a lookup in step j reads the tables of exactly the steps
// before j - S, on every replica alike; S = 0 is sync bit for bit; whenever the state is read
// whole, the waiting entries are applied first); `geo` lets each replica train its own copy
// of the tables and exchanges the deltas of the rows it touched every K steps (Paddle's
// GeoSGD): lookups see the other replicas' updates up to K - 1 steps late, in exchange for
// far fewer sparse bytes (a row touched many times in K steps travels once). Dense
// parameters are all-reduced every step in both. Wherever the whole job's state is read (the
// run's last step, a plan transition, a checkpoint) the replicas agree again: the step before
// it exchanges first and then gathers like sync. A sharded plan (--plan.shard-params), one
// replica or a stage without sparse tables exchange as sync. `hetero`, the heterogeneous
// pipeline, is a placement, not an exchange: two pipeline stages, every table lookup in the
// first (the planner's cut, search_options::lookups_first), the two stages' workers on
// disjoint halves of the process's cores; its tables are exchanged as sync (exact).
//
//   table_exchange ex;
//   ex.mode = exchange_mode::geo;
//   ex.geo_steps = 10;
//   ex.steps = 25;                                                 // the runtime sets it
//   assert(ex.exchanges_before(10) && !ex.exchanges_before(11));   // every 10 steps
//   assert(ex.gathers(24) && ex.exchanges_before(24));             // the last step: replicas agree
//   // on the worker's thread, between steps (a collective over the dp group):
//   //   auto bytes = exchange_local_rows(*piece, tables, channel, dp_group, step, timeout);
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/param_actor.hpp"
#include "planner/plan.hpp"
#include "transport/channel.hpp"

namespace cohort::actors {

enum class exchange_mode { sync, async, geo, hetero };
std::string to_string(exchange_mode m);
/// "sync", "async", "geo" or "hetero"; an error naming --exec.mode otherwise.
result<exchange_mode> parse_exchange_mode(const std::string& text);

struct table_exchange {
  exchange_mode mode = exchange_mode::sync;
  std::int64_t geo_steps = 10;                      // K
  std::int64_t staleness = 4;                       // async: S steps
  delta_encoding geo_deltas = delta_encoding::f32;  // geo: how the deltas travel
  /// Where the replicas must agree (set by the runtime from run_options): after the run's
  /// steps, at each plan change, after every checkpoint_every steps.
  std::int64_t steps = 0;
  std::vector<std::int64_t> change_at;
  std::int64_t checkpoint_every = 0;
  /// Test hook (--fault.geo-exit-step, --fault.geo-exit-rank): the worker of this rank, in the
  /// exchange before this step, hands its block to the next replica of the ring alone and
  /// kills its process — an exchange that stops halfway: some replicas merge, others do not
  /// (the first attempt only: not the step the recovery redoes).
  std::int64_t exit_step = -1;
  int exit_rank = -1;

  bool geo() const { return mode == exchange_mode::geo; }
  bool hetero() const { return mode == exchange_mode::hetero; }
  /// Async mode: the steps a step's table entries wait after its commit (0 otherwise).
  std::int64_t table_delay() const { return mode == exchange_mode::async ? staleness : 0; }
  /// Geo mode: the replicas exchange their kept rows before step `step` (0-based).
  bool exchanges_before(std::int64_t step) const;
  /// Step `step` gathers its sparse entries as sync does (the replicas agree after it).
  bool gathers(std::int64_t step) const;
  /// Geo mode: the steps done when the replicas' tables last agreed, as a recovery `done` steps
  /// into the run sees them (an exchange before a step that committed, or a step gathered as
  /// sync; 0: the start). The exchange before step `done`, the step the recovery redoes, does
  /// not count: it may have stopped halfway, and every replica undoes it.
  std::int64_t agreed_through(std::int64_t done) const;
  /// What a recovery after `done` steps does to the tables (recovery_record::tables): async
  /// applies every waiting entry now (the replicas' copies are read whole), geo goes back to
  /// the last agreement (every replica's own updates since are dropped: the rows it kept are
  /// copied at their bases); empty for sync and hetero.
  std::string recovery_note(std::int64_t done) const;
};

/// Geo mode's promise at the end of a run: every data-parallel replica's piece (by rank, as
/// collected) equals replica 0's bit for bit (an error naming the first rank that differs).
/// Nothing to check for a sharded plan.
status replicas_agree(const planner::parallel_plan& plan, const std::vector<tensor>& pieces);

/// Geo mode's exchange, on a worker's thread between steps (every rank of `group` at the same
/// point): each replica's kept rows and deltas to every other, then each table row that any
/// replica touched is set to its base plus the deltas in replica order (local_rows::merge).
/// Returns the bytes this rank sent.
result<std::int64_t> exchange_local_rows(parameter_piece& piece, const std::vector<sparse_table_grad>& tables,
                                         transport::channel& ch, const std::vector<int>& group, std::uint64_t step,
                                         std::chrono::milliseconds timeout,
                                         delta_encoding encoding = delta_encoding::f32, bool exit_halfway = false);
/// "f32" or "bf16"; an error naming --exec.geo-deltas otherwise.
result<delta_encoding> parse_delta_encoding(const std::string& text);

}  // namespace cohort::actors
