// Buddy copies: who keeps whose copy, and the messages that keep it exact.
#include "actors/replicas.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "planner/rank_layout.hpp"

namespace cohort::actors {
namespace {

constexpr std::uint64_t replica_tag_space = 8;
constexpr std::int64_t max_tables = 1 << 16;

// One message of a copy's step: the parts of a seed or a gradient under their own tags.
std::uint64_t replica_tag(std::uint64_t step, std::uint64_t part) {
  return (replica_tag_space << 40) | ((step & 0xffffffffull) << 8) | (part & 0xffull);
}
enum part : std::uint64_t {
  seed_meta = 0,
  seed_values = 1,
  grad_meta = 2,
  grad_dense = 3,
  grad_entries = 4,
  seed_slot = 5
};

// int64 values as pairs of i32 (low word first).
void put(std::vector<std::int32_t>& out, std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  out.push_back(static_cast<std::int32_t>(static_cast<std::uint32_t>(u & 0xffffffffu)));
  out.push_back(static_cast<std::int32_t>(static_cast<std::uint32_t>(u >> 32)));
}
std::int64_t get(const std::int32_t* p, std::size_t at) {
  const std::uint64_t lo = static_cast<std::uint32_t>(p[at]), hi = static_cast<std::uint32_t>(p[at + 1]);
  return static_cast<std::int64_t>(lo | (hi << 32));
}

tensor ints(const std::vector<std::int32_t>& v) { return tensor::from_ints({static_cast<std::int64_t>(v.size())}, v); }

error bad(int from, const std::string& what) {
  return make_error(errc::invalid_argument, "buddy copy from rank " + std::to_string(from) + ": " + what);
}

// A view where the channel copies at once, else a copy (the sender reuses its buffers).
tensor outgoing(transport::channel& ch, int peer, const tensor& t) { return ch.send_copies(peer) ? t : t.clone(); }

result<tensor> receive(transport::channel& ch, int from, std::uint64_t tag, dtype type,
                       std::chrono::milliseconds timeout) {
  auto t = ch.recv(from, tag, timeout);
  if (!t) return t.error();
  if (t->type() != type || t->shape().rank() != 1) return bad(from, "a part of the wrong type or shape");
  return t;
}

}  // namespace

std::vector<int> buddy_ranks(const planner::parallel_plan& plan, const std::vector<int>& owner) {
  const int ranks = plan.ranks();
  const planner::rank_layout layout(plan);
  std::map<int, std::vector<int>> hosted;  // process -> its ranks, ascending
  for (int r = 0; r < ranks; ++r) hosted[owner[static_cast<std::size_t>(r)]].push_back(r);
  std::map<int, std::size_t> dealt;
  std::vector<int> buddy(static_cast<std::size_t>(ranks), -1);
  if (hosted.size() < 2) return buddy;
  for (int r = 0; r < ranks; ++r) {
    const int home = owner[static_cast<std::size_t>(r)];
    const auto at = layout.place_of(r);
    bool replicated = false;  // an identical piece on another process
    for (int d = 0; !plan.shard_params && d < plan.dp && !replicated; ++d) {
      const int peer = layout.rank_of({d, at.stage, at.tp_rank});
      replicated = peer != r && owner[static_cast<std::size_t>(peer)] != home;
    }
    if (replicated) continue;
    auto next = hosted.upper_bound(home);
    if (next == hosted.end()) next = hosted.begin();
    const auto& theirs = next->second;
    buddy[static_cast<std::size_t>(r)] = theirs[dealt[next->first]++ % theirs.size()];
  }
  return buddy;
}

std::vector<int> copies_kept_by(const std::vector<int>& buddy, int rank) {
  std::vector<int> out;
  for (std::size_t r = 0; r < buddy.size(); ++r)
    if (buddy[r] == rank) out.push_back(static_cast<int>(r));
  return out;
}

status send_seed(transport::channel& ch, int buddy, std::uint64_t step, const piece_state& state,
                 std::chrono::milliseconds timeout) {
  std::vector<std::int32_t> meta;
  put(meta, state.steps);
  put(meta, static_cast<std::int64_t>(state.slots.size()));
  put(meta, state.values.numel());
  if (auto st = ch.send(buddy, replica_tag(step, seed_meta), ints(meta), timeout); !st) return st;
  if (auto st = ch.send(buddy, replica_tag(step, seed_values),
                        outgoing(ch, buddy, state.values.reshape({state.values.numel()})), timeout);
      !st)
    return st;
  for (std::size_t i = 0; i < state.slots.size(); ++i)
    if (auto st = ch.send(buddy, replica_tag(step, seed_slot + i),
                          outgoing(ch, buddy, state.slots[i].reshape({state.slots[i].numel()})), timeout);
        !st)
      return st;
  return {};
}

result<piece_state> receive_seed(transport::channel& ch, int from, std::uint64_t step, std::size_t slots,
                                 std::chrono::milliseconds timeout) {
  auto meta = receive(ch, from, replica_tag(step, seed_meta), dtype::i32, timeout);
  if (!meta) return meta.error();
  if (meta->numel() != 6) return bad(from, "a seed header of " + std::to_string(meta->numel()) + " words");
  const std::int32_t* m = meta->data<std::int32_t>();
  piece_state out;
  out.steps = get(m, 0);
  const std::int64_t n_slots = get(m, 2), size = get(m, 4);
  if (out.steps < 0 || n_slots != static_cast<std::int64_t>(slots) || size < 0)
    return bad(from, "a seed of " + std::to_string(n_slots) + " optimizer slots (expected " + std::to_string(slots) +
                         ") or a negative size or step");
  auto values = receive(ch, from, replica_tag(step, seed_values), dtype::f32, timeout);
  if (!values) return values.error();
  if (values->numel() != size) return bad(from, "seed values of the wrong length");
  out.values = std::move(*values);
  for (std::size_t i = 0; i < slots; ++i) {
    auto slot = receive(ch, from, replica_tag(step, seed_slot + i), dtype::f32, timeout);
    if (!slot) return slot.error();
    if (slot->numel() != size) return bad(from, "an optimizer slot of the wrong length");
    out.slots.push_back(std::move(*slot));
  }
  return out;
}

status send_gradient(transport::channel& ch, int buddy, std::uint64_t step, const piece_gradient& grad,
                     std::chrono::milliseconds timeout) {
  if (grad.local) return make_error(errc::invalid_argument, "buddy copy: geo mode's local gradients cannot be copied");
  const std::int64_t n = grad.dense.numel();
  std::vector<std::int32_t> meta;
  put(meta, n);
  put(meta, grad.blocks);
  put(meta, grad.block_size);
  put(meta, grad.delay);
  put(meta, static_cast<std::int64_t>(grad.tables.size()));
  for (const auto& t : grad.tables)
    for (std::int64_t v : {t.offset, t.rows, t.dim, t.first, t.count, t.first_row}) put(meta, v);
  if (auto st = ch.send(buddy, replica_tag(step, grad_meta), ints(meta), timeout); !st) return st;
  const tensor flat = grad.dense.reshape({n});
  tensor dense;
  if (grad.tables.empty()) {
    dense = outgoing(ch, buddy, flat);
  } else {  // the runs outside the tables, back to back
    const auto runs = runs_outside_tables(grad.tables, n);
    std::int64_t total = 0;
    for (const range& r : runs) total += r.size();
    dense = tensor::empty({total});
    std::int64_t at = 0;
    for (const range& r : runs) {
      dense.slice(0, at, at + r.size()).copy_from(flat.slice(0, r.begin, r.end));
      at += r.size();
    }
  }
  if (auto st = ch.send(buddy, replica_tag(step, grad_dense), std::move(dense), timeout); !st) return st;
  const std::int64_t entries = grad.blocks * grad.block_size;
  if (entries > 0) {
    if (grad.entries.numel() < entries)
      return make_error(errc::invalid_argument, "buddy copy: sparse entries shorter than their blocks");
    const tensor e = grad.entries.reshape({grad.entries.numel()}).slice(0, 0, entries);
    if (auto st = ch.send(buddy, replica_tag(step, grad_entries), outgoing(ch, buddy, e), timeout); !st) return st;
  }
  return {};
}

result<piece_gradient> receive_gradient(transport::channel& ch, int from, std::uint64_t step, std::int64_t piece_size,
                                        tensor& scratch, std::chrono::milliseconds timeout) {
  auto meta = receive(ch, from, replica_tag(step, grad_meta), dtype::i32, timeout);
  if (!meta) return meta.error();
  const std::int32_t* m = meta->data<std::int32_t>();
  const auto words = static_cast<std::size_t>(meta->numel());
  if (words < 10) return bad(from, "a gradient header of " + std::to_string(words) + " words");
  piece_gradient g;
  const std::int64_t n = get(m, 0), tables = get(m, 8);
  g.blocks = get(m, 2);
  g.block_size = get(m, 4);
  g.delay = get(m, 6);
  if (n != piece_size)
    return bad(from, "a gradient of " + std::to_string(n) + " elements for a piece of " + std::to_string(piece_size));
  if (tables < 0 || tables > max_tables || words != 10 + 12 * static_cast<std::size_t>(tables) || g.blocks < 0 ||
      g.block_size < 0 || g.delay < 0 || (g.block_size > 0 && g.blocks > (std::int64_t{1} << 40) / g.block_size))
    return bad(from, "a malformed gradient header");
  for (std::int64_t t = 0; t < tables; ++t) {
    const std::size_t at = 10 + 12 * static_cast<std::size_t>(t);
    g.tables.push_back({get(m, at), get(m, at + 2), get(m, at + 4), get(m, at + 6), get(m, at + 8), get(m, at + 10)});
    const auto& s = g.tables.back();
    if (s.rows < 0 || s.dim < 1 || s.count < 0 || s.first < 0 || s.first_row < 0) return bad(from, "a malformed table");
  }
  auto dense = receive(ch, from, replica_tag(step, grad_dense), dtype::f32, timeout);
  if (!dense) return dense.error();
  if (g.tables.empty()) {
    if (dense->numel() != n) return bad(from, "a dense gradient of the wrong length");
    g.dense = std::move(*dense);
  } else {
    const auto runs = runs_outside_tables(g.tables, n);
    std::int64_t total = 0;
    for (const range& r : runs) total += r.size();
    if (dense->numel() != total) return bad(from, "dense runs of the wrong length");
    if (scratch.numel() != n) scratch = tensor::zeros({n});  // the tables' ranges stay zero, never read
    std::int64_t at = 0;
    for (const range& r : runs) {
      scratch.slice(0, r.begin, r.end).copy_from(dense->slice(0, at, at + r.size()));
      at += r.size();
    }
    g.dense = scratch;
  }
  const std::int64_t entries = g.blocks * g.block_size;
  if (entries > 0) {
    auto e = receive(ch, from, replica_tag(step, grad_entries), dtype::f32, timeout);
    if (!e) return e.error();
    if (e->numel() != entries) return bad(from, "sparse entries of the wrong length");
    g.entries = std::move(*e);
  }
  return g;
}

}  // namespace cohort::actors
