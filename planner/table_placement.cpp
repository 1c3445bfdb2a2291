// The embedding tables' placement over the tensor-parallel ranks: a greedy pass (largest
// tables first, each to its cheapest option that fits) and then single-table moves while
// one lowers the predicted step (the greedy pass alone can replicate a first table that a
// table-wise owner would have served better once the others arrive).
#include "planner/table_placement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace cohort::planner {
namespace {

constexpr double cache_line_bytes = 64;

// One option's cost for one table: bytes and seconds on each rank, seconds of exchange.
struct option_cost {
  std::vector<double> bytes, seconds;
  double exchange_s = 0;
};

class placer {
 public:
  explicit placer(const table_request& r) : r_(r), ranks_(static_cast<std::size_t>(r.tp)) {}

  std::vector<table_choice> options(const table_spec& t) const {
    std::vector<table_choice> out;
    for (int k = 0; k < r_.tp; ++k) out.push_back({table_sharding::table, k});
    if (r_.tp > 1 && t.rows >= r_.tp) out.push_back({table_sharding::row});
    if (r_.tp > 1 && t.dim >= r_.tp) out.push_back({table_sharding::column});
    out.push_back({table_sharding::replicated});
    if (r_.tp == 1) out.erase(out.begin());  // one rank: the table is simply there
    return out;
  }

  option_cost cost(const table_spec& t, const table_choice& c) const {
    option_cost o;
    o.bytes.assign(ranks_, 0.0);
    o.seconds.assign(ranks_, 0.0);
    const double row_bytes = static_cast<double>(t.dim) * 4.0;
    const double table_bytes = static_cast<double>(t.rows) * row_bytes * (1.0 + r_.optimizer_slots);
    // a row read at a random id costs at least a cache line, however narrow: the rates were
    // measured on 64-byte rows, and a column shard's half rows cost what whole ones do; a
    // rank's piece of `piece_bytes` is read at the rates of a table that size (in the caches
    // or not)
    const double rows_bytes = static_cast<double>(t.rows) * row_bytes;
    auto work_of = [&](double bytes_per_row, double piece_bytes) {
      const table_rate at = rates_at(r_.rates_by_size, piece_bytes, {0, r_.lookup_bytes_per_s, r_.update_bytes_per_s});
      return t.ids_per_step * std::max(bytes_per_row, cache_line_bytes) *
             (1.0 / at.lookup_bytes_per_s + 1.0 / at.update_bytes_per_s);
    };
    const double tp = r_.tp, pooled = r_.pooled_rows * row_bytes;
    const double work = work_of(row_bytes, rows_bytes);
    const double rounds = std::ceil(std::log2(std::max(2.0, tp)));
    const double allreduce =
        2.0 * rounds * r_.link.latency_s + 2.0 * (tp - 1) / tp * pooled / r_.link.bandwidth_bytes_per_s;
    switch (c.how) {
      case table_sharding::replicated:
        std::fill(o.bytes.begin(), o.bytes.end(), table_bytes);
        std::fill(o.seconds.begin(), o.seconds.end(), work);
        break;
      case table_sharding::row:
      case table_sharding::column:
        for (std::size_t k = 0; k < ranks_; ++k) {
          o.bytes[k] = table_bytes / tp;
          // row: a tp-th of the ids each; column: every id, a tp-th of each row
          o.seconds[k] = c.how == table_sharding::row ? work_of(row_bytes, rows_bytes / tp) / tp
                                                      : work_of(row_bytes / tp, rows_bytes / tp);
        }
        // row: the partial sums added (an allreduce); column: the columns gathered (half of it)
        o.exchange_s = c.how == table_sharding::row ? allreduce : 0.5 * allreduce;
        break;
      case table_sharding::table:
        o.bytes[static_cast<std::size_t>(c.owner)] = table_bytes;
        o.seconds[static_cast<std::size_t>(c.owner)] = work;
        o.exchange_s = r_.tp > 1 ? allreduce : 0.0;
        break;
    }
    return o;
  }

  // Adds (sign +1) or removes (-1) a table's option from the ranks' loads.
  void apply(const option_cost& o, double sign) {
    for (std::size_t k = 0; k < ranks_; ++k) {
      bytes_[k] += sign * o.bytes[k];
      seconds_[k] += sign * o.seconds[k];
    }
    exchange_ += sign * o.exchange_s;
  }

  double objective() const { return *std::max_element(seconds_.begin(), seconds_.end()) + exchange_; }
  bool fits() const {
    for (double b : bytes_)
      if (b > r_.memory_per_rank_bytes) return false;
    return true;
  }

  // The best option for table i given the others (its own removed first); false: none fits.
  bool best_for(std::size_t i, table_choice& best) {
    const table_spec& t = r_.tables[i];
    double best_value = 0;
    bool found = false;
    for (const table_choice& c : options(t)) {
      const option_cost o = cost(t, c);
      apply(o, +1);
      const double value = objective();
      if (fits() && (!found || value < best_value * (1 - 1e-9))) {
        found = true;
        best_value = value;
        best = c;
      }
      apply(o, -1);
    }
    return found;
  }

  table_plan run() {
    bytes_.assign(ranks_, 0.0);
    seconds_.assign(ranks_, 0.0);
    table_plan p;
    p.tables.assign(r_.tables.size(), {});
    std::vector<std::size_t> order(r_.tables.size());
    std::iota(order.begin(), order.end(), 0);
    auto size_of = [&](std::size_t i) { return static_cast<double>(r_.tables[i].rows) * r_.tables[i].dim; };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return size_of(a) > size_of(b); });
    std::string homeless;
    for (std::size_t i : order) {
      table_choice c;
      if (!best_for(i, c)) {
        if (homeless.empty()) homeless = r_.tables[i].name;
        c = r_.tp > 1 && r_.tables[i].rows >= r_.tp ? table_choice{table_sharding::row} : table_choice{};
      }
      p.tables[i] = c;
      apply(cost(r_.tables[i], c), +1);
    }
    if (!homeless.empty() && r_.tp > 1) {  // the greedy pass filled a rank: every table row-wise may still fit
      for (std::size_t i : order) apply(cost(r_.tables[i], p.tables[i]), -1);
      for (std::size_t i : order) {
        p.tables[i] = r_.tables[i].rows >= r_.tp ? table_choice{table_sharding::row} : table_choice{};
        apply(cost(r_.tables[i], p.tables[i]), +1);
      }
      if (fits()) homeless.clear();
    }
    if (homeless.empty()) {
      for (int round = 0; round < 20; ++round) {
        bool moved = false;
        for (std::size_t i : order) {
          const double before = objective();
          apply(cost(r_.tables[i], p.tables[i]), -1);
          table_choice c = p.tables[i];
          if (best_for(i, c)) {
            apply(cost(r_.tables[i], c), +1);
            if (objective() < before * (1 - 1e-9)) {
              p.tables[i] = c;
              moved = true;
              continue;
            }
            apply(cost(r_.tables[i], c), -1);
          }
          apply(cost(r_.tables[i], p.tables[i]), +1);
        }
        if (!moved) break;
      }
    }
    p.rank_bytes = bytes_;
    p.rank_seconds = seconds_;
    p.exchange_seconds = exchange_;
    p.step_seconds = objective();
    p.fits = homeless.empty() && fits();
    if (!p.fits) p.what_would_fit = what_would_fit(homeless);
    return p;
  }

 private:
  std::string what_would_fit(const std::string& homeless) const {
    double all = 0, largest = 0;
    for (const auto& t : r_.tables) {
      const double b = static_cast<double>(t.rows) * t.dim * 4.0 * (1.0 + r_.optimizer_slots);
      all += b;
      largest = std::max(largest, b);
    }
    const double need_ranks = std::ceil(all / r_.memory_per_rank_bytes);
    char b[512];
    std::snprintf(b, sizeof b,
                  "%s fits on no rank: the tables and their optimizer state take %.2f GB (the largest %.2f GB) and "
                  "a rank may give them %.2f GB; it would take --plan.tp=%.0f or more ranks of this memory, or "
                  "%.2f GB per rank at tp %d (every table row-wise)",
                  homeless.c_str(), all / 1e9, largest / 1e9, r_.memory_per_rank_bytes / 1e9, need_ranks,
                  all / r_.tp / 1e9, r_.tp);
    return b;
  }

  const table_request& r_;
  std::size_t ranks_;
  std::vector<double> bytes_, seconds_;
  double exchange_ = 0;
};

}  // namespace

table_rate rates_at(const std::vector<table_rate>& by_size, double bytes, const table_rate& whole) {
  if (by_size.empty()) return {bytes, whole.lookup_bytes_per_s, whole.update_bytes_per_s};
  const table_rate &first = by_size.front(), &last = by_size.back();
  if (bytes <= first.table_bytes) return {bytes, first.lookup_bytes_per_s, first.update_bytes_per_s};
  if (bytes >= last.table_bytes) return {bytes, last.lookup_bytes_per_s, last.update_bytes_per_s};
  std::size_t hi = 1;
  while (by_size[hi].table_bytes < bytes) ++hi;
  const table_rate& a = by_size[hi - 1];
  const table_rate& b = by_size[hi];
  const double f = std::log(bytes / a.table_bytes) / std::log(b.table_bytes / a.table_bytes);
  auto between = [f](double rate_a, double rate_b) {  // seconds per byte, linear in log(size)
    return 1.0 / ((1.0 - f) / rate_a + f / rate_b);
  };
  return {bytes, between(a.lookup_bytes_per_s, b.lookup_bytes_per_s),
          between(a.update_bytes_per_s, b.update_bytes_per_s)};
}

std::string table_rates_problem(const std::vector<table_rate>& by_size) {
  for (std::size_t i = 0; i < by_size.size(); ++i) {
    const table_rate& t = by_size[i];
    const std::string at = "[" + std::to_string(i) + "]: ";
    for (double v : {t.table_bytes, t.lookup_bytes_per_s, t.update_bytes_per_s})
      if (!(v > 0) || !std::isfinite(v)) return at + "the size and the rates must be positive and finite";
    if (i > 0 && !(t.table_bytes > by_size[i - 1].table_bytes)) return at + "the sizes must ascend";
  }
  return "";
}

result<table_plan> place_tables(const table_request& r) {
  if (r.tp < 1) return make_error(errc::invalid_argument, "table placement: tp must be at least 1");
  if (!(r.pooled_rows > 0)) return make_error(errc::invalid_argument, "table placement: pooled_rows must be positive");
  if (!(r.memory_per_rank_bytes > 0))
    return make_error(errc::invalid_argument, "table placement: memory_per_rank_bytes must be positive");
  if (!(r.lookup_bytes_per_s > 0) || !(r.update_bytes_per_s > 0))
    return make_error(errc::invalid_argument, "table placement: the lookup and update rates must be positive");
  if (r.tp > 1 && (!(r.link.bandwidth_bytes_per_s > 0) || !(r.link.latency_s >= 0)))
    return make_error(errc::invalid_argument, "table placement: the link's bandwidth must be positive");
  if (r.optimizer_slots < 0) return make_error(errc::invalid_argument, "table placement: optimizer_slots < 0");
  if (auto problem = table_rates_problem(r.rates_by_size); !problem.empty())
    return make_error(errc::invalid_argument, "table placement: rates_by_size" + problem);
  for (const auto& t : r.tables)
    if (t.rows < 1 || t.dim < 1 || !(t.ids_per_step >= 0))
      return make_error(errc::invalid_argument,
                        "table placement: table '" + t.name + "' needs positive rows and dim and ids_per_step >= 0");
  return placer(r).run();
}

std::string explain(const table_request& r, const table_plan& p) {
  std::string out;
  char b[512];
  for (auto how : {table_sharding::table, table_sharding::row, table_sharding::column, table_sharding::replicated}) {
    std::string names;
    int count = 0;
    for (std::size_t i = 0; i < p.tables.size(); ++i)
      if (p.tables[i].how == how) {
        ++count;
        if (count <= 8) {
          names += (names.empty() ? "" : ", ") + r.tables[i].name;
          if (how == table_sharding::table) names += "@" + std::to_string(p.tables[i].owner);
        } else if (count == 9) {
          names += ", ...";
        }
      }
    if (count == 0) continue;
    std::snprintf(b, sizeof b, "tables: %d %s: ", count,
                  how == table_sharding::table ? "table-wise (@rank)" : to_string(how));
    out += b + names + "\n";
  }
  std::string bytes, seconds;
  for (std::size_t k = 0; k < p.rank_bytes.size(); ++k) {
    std::snprintf(b, sizeof b, "%s%.3g", k == 0 ? "" : "/", p.rank_bytes[k] / 1e9);
    bytes += b;
    std::snprintf(b, sizeof b, "%s%.3g", k == 0 ? "" : "/", p.rank_seconds[k] * 1e3);
    seconds += b;
  }
  std::string rates;
  if (r.rates_by_size.empty()) {
    std::snprintf(b, sizeof b, "lookup %.2f GB/s, update %.2f GB/s", r.lookup_bytes_per_s / 1e9,
                  r.update_bytes_per_s / 1e9);
    rates = b;
  } else {  // each piece at its size: the smallest and the largest measured
    const table_rate &small = r.rates_by_size.front(), &large = r.rates_by_size.back();
    std::snprintf(b, sizeof b,
                  "by a piece's size: lookup %.2f GB/s (%.3g MB) to %.2f GB/s (%.3g MB), update %.2f to %.2f GB/s",
                  small.lookup_bytes_per_s / 1e9, small.table_bytes / 1e6, large.lookup_bytes_per_s / 1e9,
                  large.table_bytes / 1e6, small.update_bytes_per_s / 1e9, large.update_bytes_per_s / 1e9);
    rates = b;
  }
  std::snprintf(b, sizeof b,
                "tables: per rank %s GB of %.3g GB, %s ms of lookups and updates per step, %.3g ms of exchanges; "
                "rates: %s (%s)\n",
                bytes.c_str(), r.memory_per_rank_bytes / 1e9, seconds.c_str(), p.exchange_seconds * 1e3, rates.c_str(),
                r.rates_source.c_str());
  out += b;
  if (!p.fits) out += "tables: " + p.what_would_fit + "\n";
  return out;
}

}  // namespace cohort::planner
