// Ring reduce-scatter, ring all-gather, and allreduce as the two in sequence.
// n ranks, n pieces. Reduce-scatter: at step s rank i sends its running piece (i-s-1) mod n
// to its successor and folds the piece (i-s-2) mod n received from its predecessor into its
// own; after n-1 steps it holds piece i fully reduced. All-gather: at step s rank i passes
// on piece (i-s) mod n and stores piece (i-s-1) mod n.
#include <cstring>

#include "transport/collectives.hpp"
#include "transport/ring.hpp"

namespace cohort::transport {

using detail::exchange_step;

void sum_floats(float* acc, const float* in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) acc[i] += in[i];
}

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

// In-place ring reduce-scatter over the flat buffer `work`; piece i ends reduced on rank i.
status reduce_scatter_in_place(channel& ch, const detail::ring_position& p, tensor& work, const collective_options& o,
                               const char* what) {
  const std::int64_t n = work.numel();
  const detail::reduce_landing scratch(ch, p.prev);
  for (int s = 0; s < p.size - 1; ++s) {
    range out = shard_range(n, p.size, mod(p.index - s - 1, p.size));
    range in = shard_range(n, p.size, mod(p.index - s - 2, p.size));
    auto st = exchange_step(ch, p.next, p.prev, work, out, in, o, what, s, scratch, [&](range r, const tensor& got) {
      o.reduce(work.data<float>() + r.begin, got.data<float>(), r.size());
    });
    if (!st) return st;
  }
  return {};
}

// In-place ring all-gather: piece i of `work` is valid on rank i; afterwards all are.
status all_gather_in_place(channel& ch, const detail::ring_position& p, tensor& work, const collective_options& o,
                           const char* what) {
  const std::int64_t n = work.numel();
  const std::size_t elem = size_of(work.type());
  for (int s = 0; s < p.size - 1; ++s) {
    range out = shard_range(n, p.size, mod(p.index - s, p.size));
    range in = shard_range(n, p.size, mod(p.index - s - 1, p.size));
    auto in_place = [&](range r) {
      return tensor(work.storage_ptr(), shape{r.size()}, work.type(), work.offset() + r.begin);
    };
    auto st = exchange_step(ch, p.next, p.prev, work, out, in, o, what, s, in_place, [&](range r, const tensor& got) {
      if (r.size() > 0 && got.data<std::byte>() != work.data<std::byte>() + r.begin * static_cast<std::int64_t>(elem))
        std::memcpy(work.data<std::byte>() + r.begin * static_cast<std::int64_t>(elem), got.data<std::byte>(),
                    static_cast<std::size_t>(r.size()) * elem);
    });
    if (!st) return st;
  }
  return {};
}

status check_flat_f32(const tensor& t, const char* what) {
  if (!t.is_contiguous() || t.type() != dtype::f32)
    return make_error(errc::invalid_argument, std::string(what) + ": needs a contiguous f32 tensor");
  return {};
}

}  // namespace

status allreduce_ring(channel& ch, const std::vector<int>& group, tensor& buf, const collective_options& o) {
  auto p = detail::locate(ch, group, "allreduce");
  if (!p) return p.error();
  if (auto st = check_flat_f32(buf, "allreduce"); !st) return st;
  if (p->size == 1) return {};
  tensor flat = buf.reshape({buf.numel()});
  if (auto st = reduce_scatter_in_place(ch, *p, flat, o, "allreduce (reduce-scatter)"); !st) return st;
  return all_gather_in_place(ch, *p, flat, o, "allreduce (all-gather)");
}

status reduce_scatter_ring(channel& ch, const std::vector<int>& group, const tensor& in, tensor& out,
                           const collective_options& o) {
  if (auto st = check_flat_f32(in, "reduce_scatter"); !st) return st;
  tensor work = in.reshape({in.numel()}).clone();
  return reduce_scatter_ring_consuming(ch, group, work, out, o);
}

status reduce_scatter_ring_consuming(channel& ch, const std::vector<int>& group, tensor& buf, tensor& out,
                                     const collective_options& o) {
  auto p = detail::locate(ch, group, "reduce_scatter");
  if (!p) return p.error();
  if (auto st = check_flat_f32(buf, "reduce_scatter"); !st) return st;
  range mine = shard_range(buf.numel(), p->size, p->index);
  if (out.numel() != mine.size())
    return make_error(errc::invalid_argument, "reduce_scatter: output has " + std::to_string(out.numel()) +
                                                  " elements, this rank's piece " + std::to_string(mine.size()));
  tensor work = buf.reshape({buf.numel()});
  if (auto st = reduce_scatter_in_place(ch, *p, work, o, "reduce_scatter"); !st) return st;
  if (mine.size() > 0) out.reshape({out.numel()}).copy_from(work.slice(0, mine.begin, mine.end));
  return {};
}

status all_gather_ring(channel& ch, const std::vector<int>& group, const tensor& mine, tensor& out,
                       const collective_options& o) {
  auto p = detail::locate(ch, group, "all_gather");
  if (!p) return p.error();
  if (auto st = check_flat_f32(out, "all_gather"); !st) return st;
  range r = shard_range(out.numel(), p->size, p->index);
  if (mine.numel() != r.size())
    return make_error(errc::invalid_argument, "all_gather: this rank's piece has " + std::to_string(mine.numel()) +
                                                  " elements, expected " + std::to_string(r.size()));
  tensor flat = out.reshape({out.numel()});
  if (r.size() > 0) {
    tensor place = flat.slice(0, r.begin, r.end);
    if (place.data<std::byte>() != mine.data<std::byte>() || !mine.is_contiguous())  // `mine` may already be in place
      place.copy_from(mine.contiguous().reshape({r.size()}));
  }
  return all_gather_in_place(ch, *p, flat, o, "all_gather");
}

}  // namespace cohort::transport
