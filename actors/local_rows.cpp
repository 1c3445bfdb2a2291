// Geo mode's kept rows: keep before an update, pack the deltas, merge every replica's.
#include "actors/local_rows.hpp"

#include <cstring>
#include <string>

namespace cohort::actors {
namespace {

std::int32_t int_at(const float* p) {
  std::int32_t r;
  std::memcpy(&r, p, sizeof r);
  return r;
}

void put_int(float* p, std::int64_t v) {
  const auto i = static_cast<std::int32_t>(v);
  std::memcpy(p, &i, sizeof i);
}

// Floats that hold `n` deltas.
std::int64_t delta_floats(std::int64_t n, delta_encoding e) { return e == delta_encoding::bf16 ? (n + 1) / 2 : n; }

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                                           // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

// Delta i of a table's delta region.
float delta_at(const float* region, std::int64_t i, delta_encoding e) {
  if (e == delta_encoding::f32) return region[i];
  std::uint16_t h;
  std::memcpy(&h, reinterpret_cast<const char*>(region) + 2 * i, sizeof h);
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void put_delta(float* region, std::int64_t i, float v, delta_encoding e) {
  if (e == delta_encoding::f32) {
    region[i] = v;
    return;
  }
  const std::uint16_t h = to_bf16(v);
  std::memcpy(reinterpret_cast<char*>(region) + 2 * i, &h, sizeof h);
}

const char* name_of(delta_encoding e) { return e == delta_encoding::bf16 ? "bf16" : "f32"; }

// A well-formed block: its counts, and its rows inside their tables.
status check_block(const std::vector<table_span>& tables, const packed_block& b, std::size_t which, delta_encoding e) {
  const auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, "geo exchange: replica " + std::to_string(which) + "'s block " + why);
  };
  const auto n = static_cast<std::int64_t>(tables.size());
  if (b.size < 1 + n) return bad("is shorter than its counts");
  if (int_at(b.data) != static_cast<std::int32_t>(e))
    return bad("is not encoded as " + std::string(name_of(e)) + " (--exec.geo-deltas differs between replicas)");
  std::int64_t at = 1 + n;
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const std::int64_t count = int_at(b.data + 1 + t);
    if (count < 0 || count > tables[t].rows) return bad("counts " + std::to_string(count) + " rows of a table");
    const std::int64_t size = count + delta_floats(count * tables[t].width(), e);
    if (at + size > b.size) return bad("is shorter than its rows");
    for (std::int64_t i = 0; i < count; ++i)
      if (!tables[t].holds(int_at(b.data + at + i)))
        return bad("names row " + std::to_string(int_at(b.data + at + i)) + " outside the table");
    at += size;
  }
  if (at != b.size) return bad("is longer than its rows");
  return {};
}

}  // namespace

void table_span::read(std::int32_t r, float* out) const {
  const std::int64_t at = (r - first_row) * dim;
  std::memcpy(out, values + at, static_cast<std::size_t>(dim) * sizeof(float));
  if (state != nullptr) std::memcpy(out + dim, state + at, static_cast<std::size_t>(dim) * sizeof(float));
}

void table_span::write(std::int32_t r, const float* in) const {
  const std::int64_t at = (r - first_row) * dim;
  std::memcpy(values + at, in, static_cast<std::size_t>(dim) * sizeof(float));
  if (state != nullptr) std::memcpy(state + at, in + dim, static_cast<std::size_t>(dim) * sizeof(float));
}

void local_rows::keep(std::size_t t, const table_span& table, const std::int32_t* rows, std::int64_t n) {
  kept_rows& k = tables_.at(t);
  if (k.seen.size() * 64 < static_cast<std::size_t>(table.rows))
    k.seen.assign(static_cast<std::size_t>((table.rows + 63) / 64), 0);
  k.first_row = table.first_row;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t r = rows[i];
    if (!table.holds(r)) continue;
    const std::int64_t at = r - table.first_row;
    if (k.has(at)) continue;
    k.seen[static_cast<std::size_t>(at >> 6)] |= std::uint64_t{1} << (at & 63);
    k.rows.push_back(r);
    k.base.resize(k.base.size() + static_cast<std::size_t>(table.width()));
    table.read(r, k.base.data() + k.base.size() - table.width());
  }
}

bool local_rows::empty() const {
  for (const auto& k : tables_)
    if (!k.rows.empty()) return false;
  return true;
}

std::vector<std::int64_t> local_rows::counts() const {
  std::vector<std::int64_t> out;
  for (const auto& k : tables_) out.push_back(static_cast<std::int64_t>(k.rows.size()));
  return out;
}

std::int64_t local_rows::packed_size(const std::vector<table_span>& tables, delta_encoding e) const {
  auto n = 1 + static_cast<std::int64_t>(tables.size());
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const auto count = static_cast<std::int64_t>(tables_.at(t).rows.size());
    n += count + delta_floats(count * tables[t].width(), e);
  }
  return n;
}

void local_rows::pack(const std::vector<table_span>& tables, float* out, delta_encoding e) const {
  put_int(out, static_cast<std::int32_t>(e));
  ++out;
  float* at = out + tables.size();
  std::vector<float> now;
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const kept_rows& k = tables_.at(t);
    const auto count = static_cast<std::int64_t>(k.rows.size());
    const std::int64_t w = tables[t].width();
    put_int(out + t, count);
    for (std::int64_t i = 0; i < count; ++i) put_int(at + i, k.rows[static_cast<std::size_t>(i)]);
    float* d = at + count;
    now.resize(static_cast<std::size_t>(w));
    const std::int64_t floats = delta_floats(count * w, e);
    if (floats > 0) d[floats - 1] = 0.f;  // bf16: an odd count's last half
    for (std::int64_t i = 0; i < count; ++i) {
      tables[t].read(k.rows[static_cast<std::size_t>(i)], now.data());
      const float* base = k.base.data() + i * w;
      for (std::int64_t j = 0; j < w; ++j) put_delta(d, i * w + j, now[static_cast<std::size_t>(j)] - base[j], e);
    }
    at += count + floats;
  }
}

status local_rows::merge(const std::vector<table_span>& tables, const std::vector<packed_block>& blocks,
                         delta_encoding e, std::int64_t step) {
  for (std::size_t b = 0; b < blocks.size(); ++b)
    if (auto st = check_block(tables, blocks[b], b, e); !st) return st;
  std::vector<std::int64_t> at(blocks.size(), 1 + static_cast<std::int64_t>(tables.size()));
  last_merge_.assign(tables.size(), {});
  last_merge_step_ = step;
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const table_span& table = tables[t];
    const kept_rows& k = tables_.at(t);
    const std::int64_t dim = table.width();              // a row's record: values (and state)
    std::unordered_map<std::int32_t, std::int64_t> own;  // a kept row -> its base
    own.reserve(k.rows.size());
    for (std::size_t i = 0; i < k.rows.size(); ++i) own.emplace(k.rows[i], static_cast<std::int64_t>(i));
    std::unordered_map<std::int32_t, std::int64_t> slot;  // row -> its sum in `sum`
    std::vector<std::int32_t> order;
    std::vector<float> sum;
    std::vector<float>& before = last_merge_[t].before;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const std::int64_t count = int_at(blocks[b].data + 1 + t);
      const float* rows = blocks[b].data + at[b];
      const float* deltas = rows + count;
      for (std::int64_t i = 0; i < count; ++i) {
        const std::int32_t r = int_at(rows + i);
        auto [it, fresh] = slot.emplace(r, static_cast<std::int64_t>(order.size()));
        if (fresh) {
          order.push_back(r);
          auto kept = own.find(r);
          sum.resize(sum.size() + static_cast<std::size_t>(dim));
          if (kept != own.end())
            std::memcpy(sum.data() + sum.size() - dim, k.base.data() + kept->second * dim,
                        static_cast<std::size_t>(dim) * sizeof(float));
          else
            table.read(r, sum.data() + sum.size() - dim);
          // the row as the replicas agreed before this merge (its base where kept, else as it is)
          before.insert(before.end(), sum.end() - dim, sum.end());
        }
        float* s = sum.data() + it->second * dim;
        for (std::int64_t j = 0; j < dim; ++j) s[j] += delta_at(deltas, i * dim + j, e);
      }
      at[b] += count + delta_floats(count * dim, e);
    }
    last_merge_[t].rows = order;
    for (std::size_t i = 0; i < order.size(); ++i)
      table.write(order[i], sum.data() + static_cast<std::int64_t>(i) * dim);
  }
  clear();
  return {};
}

void local_rows::restore_agreed(const std::vector<table_span>& tables, std::int64_t committed) const {
  for (std::size_t t = 0; t < tables.size() && t < tables_.size(); ++t) {
    const auto& k = tables_[t];
    const auto width = static_cast<std::size_t>(tables[t].width());
    for (std::size_t i = 0; i < k.rows.size(); ++i)
      if (tables[t].holds(k.rows[i])) tables[t].write(k.rows[i], k.base.data() + i * width);
  }
  if (last_merge_step_ < 0 || last_merge_step_ <= committed) return;  // its step committed: agreed
  // after the kept rows: a row kept since the merge has the merged value as its base
  for (std::size_t t = 0; t < tables.size() && t < last_merge_.size(); ++t) {
    const auto& m = last_merge_[t];
    const auto width = static_cast<std::size_t>(tables[t].width());
    if (m.before.size() != m.rows.size() * width) continue;  // (the table's layout changed since)
    for (std::size_t i = 0; i < m.rows.size(); ++i)
      if (tables[t].holds(m.rows[i])) tables[t].write(m.rows[i], m.before.data() + i * width);
  }
}

void local_rows::clear() {
  for (auto& k : tables_) {
    for (std::int32_t r : k.rows) {  // the bits of the kept rows alone (rows are within the table)
      const std::int64_t at = r - k.first_row;
      k.seen[static_cast<std::size_t>(at >> 6)] &= ~(std::uint64_t{1} << (at & 63));
    }
    k.rows.clear();
    k.base.clear();
  }
}

}  // namespace cohort::actors
