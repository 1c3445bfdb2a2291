// The exchange modes' schedule and geo mode's collective.
#include "actors/table_exchange.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <thread>

#include "planner/rank_layout.hpp"

#include "transport/collectives.hpp"

namespace cohort::actors {
namespace {

constexpr std::uint64_t geo_tag_space = 7;

}  // namespace

std::string to_string(exchange_mode m) {
  switch (m) {
    case exchange_mode::async:
      return "async";
    case exchange_mode::geo:
      return "geo";
    case exchange_mode::hetero:
      return "hetero";
    default:
      return "sync";
  }
}

result<exchange_mode> parse_exchange_mode(const std::string& text) {
  if (text == "sync") return exchange_mode::sync;
  if (text == "geo") return exchange_mode::geo;
  if (text == "async") return exchange_mode::async;
  if (text == "hetero") return exchange_mode::hetero;
  return make_error(errc::invalid_argument, "--exec.mode must be sync, async, geo or hetero, not '" + text + "'");
}

result<delta_encoding> parse_delta_encoding(const std::string& text) {
  if (text == "f32") return delta_encoding::f32;
  if (text == "bf16") return delta_encoding::bf16;
  return make_error(errc::invalid_argument, "--exec.geo-deltas must be f32 or bf16, not '" + text + "'");
}

bool table_exchange::gathers(std::int64_t step) const {
  const std::int64_t done = step + 1;
  if (done == steps) return true;
  if (std::find(change_at.begin(), change_at.end(), done) != change_at.end()) return true;
  return checkpoint_every > 0 && done % checkpoint_every == 0;
}

bool table_exchange::exchanges_before(std::int64_t step) const {
  if (!geo()) return false;
  return (step > 0 && step % std::max<std::int64_t>(geo_steps, 1) == 0) || gathers(step);
}

std::int64_t table_exchange::agreed_through(std::int64_t done) const {
  if (done > 0 && gathers(done - 1)) return done;  // the last step done gathered as sync
  // an exchange before step d agreed once step d committed: not the one before step `done`,
  // the step a recovery redoes (a failure in it may have stopped the exchange halfway)
  for (std::int64_t d = done - 1; d > 0; --d)
    if (d % std::max<std::int64_t>(geo_steps, 1) == 0 || gathers(d - 1)) return d;
  return 0;
}

std::string table_exchange::recovery_note(std::int64_t done) const {
  if (table_delay() > 0)
    return "async: the tables' waiting entries applied at the recovery (the next " + std::to_string(staleness) +
           " steps' lookups read fresher tables)";
  if (!geo()) return "";
  const std::int64_t agreed = agreed_through(done);
  if (agreed == done) return "geo: the tables as the replicas agreed after step " + std::to_string(done);
  return "geo: the tables as the replicas last agreed (after step " + std::to_string(agreed) +
         "): every replica's own sparse updates of steps " + std::to_string(agreed + 1) + "-" + std::to_string(done) +
         " dropped";
}

status replicas_agree(const planner::parallel_plan& plan, const std::vector<tensor>& pieces) {
  if (plan.shard_params || plan.dp < 2) return {};
  const planner::rank_layout layout(plan);
  for (int r = 0; r < static_cast<int>(pieces.size()); ++r) {
    planner::rank_place at = layout.place_of(r);
    if (at.dp_rank == 0) continue;
    at.dp_rank = 0;
    const tensor& mine = pieces[static_cast<std::size_t>(r)];
    const tensor& first = pieces[static_cast<std::size_t>(layout.rank_of(at))];
    if (mine.numel() != first.numel() ||
        std::memcmp(mine.data<float>(), first.data<float>(), static_cast<std::size_t>(mine.numel()) * sizeof(float)))
      return make_error(errc::closed, "geo mode: rank " + std::to_string(r) +
                                          "'s parameters differ from replica 0's (rank " +
                                          std::to_string(layout.rank_of(at)) + ") at the end of the run");
  }
  return {};
}

result<std::int64_t> exchange_local_rows(parameter_piece& piece, const std::vector<sparse_table_grad>& tables,
                                         transport::channel& ch, const std::vector<int>& group, std::uint64_t step,
                                         std::chrono::milliseconds timeout, delta_encoding encoding,
                                         bool exit_halfway) {
  tensor mine;
  if (auto st = piece.with_local_rows(tables,
                                      [&](local_rows& kept, const std::vector<table_span>& spans) {
                                        mine = tensor::empty({kept.packed_size(spans, encoding)});
                                        kept.pack(spans, mine.data<float>(), encoding);
                                      });
      !st)
    return st.error();
  transport::collective_options o{.tag = (geo_tag_space << 40) | (step & ((std::uint64_t{1} << 40) - 1)),
                                  .timeout = timeout};
  if (exit_halfway) {  // the test hook: the ring's first hand-over, then gone as a SIGKILL leaves
    const auto me = std::find(group.begin(), group.end(), ch.rank());
    if (me != group.end() && group.size() > 1) {
      const auto at = static_cast<std::size_t>(me - group.begin());
      (void)ch.send(group[(at + 1) % group.size()], o.tag, mine.contiguous(true), timeout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the block on its way before the end
    std::raise(SIGKILL);
  }
  auto every = transport::all_gather_pieces(ch, group, mine, o);
  if (!every) return every.error();
  std::vector<packed_block> blocks;
  for (const tensor& b : *every) {
    if (b.shape().rank() != 1 || b.type() != dtype::f32)
      return make_error(errc::invalid_argument, "geo exchange: a replica's block of shape " + b.shape().to_string());
    blocks.push_back({b.data<float>(), b.numel()});
  }
  status merged;
  if (auto st = piece.with_local_rows(tables,
                                      [&](local_rows& kept, const std::vector<table_span>& spans) {
                                        merged = kept.merge(spans, blocks, encoding, static_cast<std::int64_t>(step));
                                      });
      !st)
    return st.error();
  if (!merged) return merged.error();
  return static_cast<std::int64_t>(group.size() - 1) * mine.numel() * static_cast<std::int64_t>(sizeof(float));
}

}  // namespace cohort::actors
