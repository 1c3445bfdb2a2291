// Internal helpers of the collectives: a rank's place in its ring, piece ranges, and the
// exchange step every ring and recursive-doubling step is made of.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "graph/error.hpp"
#include "graph/placement.hpp"
#include "graph/tensor.hpp"
#include "transport/channel.hpp"
#include "transport/collectives.hpp"

namespace cohort::transport::detail {

struct ring_position {
  int index = -1;  // this rank's position in the group
  int size = 0;
  int next = -1, prev = -1;  // global ranks of the neighbours
};

result<ring_position> locate(const channel& ch, const std::vector<int>& group, const char* what);

/// A contiguous copy of elements [r.begin, r.end) of a flat f32 buffer (what goes on the wire).
tensor copy_range(const tensor& flat, range r);

/// Adds context to a transport error: "allreduce step 2 (rank 3 <- 2): ..."
error in_step(const error& e, const char* what, int step, int me, int peer);

/// What goes on the wire: a view of the buffer when the channel copies it out before send()
/// returns (TCP, UCX), a copy when the receiver would share the storage (in-process).
tensor piece_to_send(const channel& ch, int peer, const tensor& work, range r);

/// Between processes pieces travel in chunks: the first of the channel's first_chunk_bytes,
/// then doubling up to 256 KiB of f32 (a chunk being reduced stays in a core's cache, and a
/// frame's own cost stays small beside its payload). In-process a piece is one part.
constexpr std::int64_t exchange_chunk_elems = std::int64_t{1} << 16;

/// The parts a piece travels in, one after the other (both ends of a pair cut a piece the same
/// way). An empty piece travels as one empty part.
class chunk_cursor {
 public:
  chunk_cursor(const channel& ch, int peer, range piece) : r_(piece), at_(piece.begin) {
    if (ch.send_copies(peer))
      size_ = std::clamp<std::int64_t>(ch.first_chunk_bytes(peer) / static_cast<std::int64_t>(sizeof(float)), 1,
                                       exchange_chunk_elems);
  }
  bool done() const { return started_ && at_ >= r_.end; }
  range next() {
    const range part{at_, size_ == 0 ? r_.end : std::min(r_.end, at_ + size_)};
    at_ = part.end;
    size_ = std::min(2 * size_, exchange_chunk_elems);
    started_ = true;
    return part;
  }

 private:
  range r_;
  std::int64_t at_;
  std::int64_t size_ = 0;  // the next part's elements; 0: the whole piece in one part
  bool started_ = false;
};

/// One step: sends elements `out` of `work` to `send_to`, receives `in` from `recv_from`.
/// Each received part (a range of `in`) is offered land(range) as its landing place when that
/// gives a tensor (channel::recv_landing: the payload may be written straight there), and
/// take(range, tensor) consumes it, wherever it landed. The next chunk is sent before the
/// current one is taken, so the transfer of one overlaps the reduction of the other; with
/// `whole_first` every chunk is sent before the first is taken (see send_whole_first). A chunk
/// is sent before the received chunk of the same range is taken, so `take` may write the
/// range it is given even when `out` and `in` overlap.
template <class Land, class Take>
status exchange_step(channel& ch, int send_to, int recv_from, const tensor& work, range out, range in,
                     const collective_options& o, const char* what, int step, Land land, Take take,
                     bool whole_first = false) {
  chunk_cursor out_parts(ch, send_to, out), in_parts(ch, recv_from, in);
  auto send_next = [&]() -> status {
    const range r = out_parts.next();
    if (auto st = ch.send(send_to, o.tag, piece_to_send(ch, send_to, work, r), o.timeout); !st)
      return in_step(st.error(), what, step, ch.rank(), send_to);
    return {};
  };
  if (auto st = send_next(); !st) return st;
  if (whole_first)
    while (!out_parts.done())
      if (auto st = send_next(); !st) return st;
  while (!in_parts.done()) {
    if (!out_parts.done())
      if (auto st = send_next(); !st) return st;
    const range r = in_parts.next();
    const tensor landing = land(r);
    auto got = landing.storage_ptr() ? ch.recv_landing(recv_from, o.tag, landing, o.timeout)
                                     : ch.recv(recv_from, o.tag, o.timeout);
    if (!got) return in_step(got.error(), what, step, ch.rank(), recv_from);
    if (got->numel() != r.size() || got->type() != work.type())
      return make_error(errc::invalid_argument, std::string(what) + ": piece of " + std::to_string(got->numel()) + " " +
                                                    to_string(got->type()) + " elements from rank " +
                                                    std::to_string(recv_from) + ", expected " +
                                                    std::to_string(r.size()) + " " + to_string(work.type()));
    take(r, got->is_contiguous() ? *got : got->contiguous());
  }
  while (!out_parts.done())
    if (auto st = send_next(); !st) return st;
  return {};
}

/// Whether a reduction step sends its piece `out` of f32 whole before taking the peer's
/// (channel::send_ahead_bytes). Recursive doubling only: measured on loopback TCP, the ring's
/// steps ran no faster so (its reduce-scatter at 2-4 MiB slower in two interleaved A/Bs), and
/// an all-gather's parts would arrive before their landing in place is offered (a copy each).
inline bool send_whole_first(const channel& ch, int peer, range out) {
  return out.size() * static_cast<std::int64_t>(sizeof(float)) <= ch.send_ahead_bytes(peer);
}

/// Where a reduction's received parts land: when `peer` is in another process, a scratch
/// buffer of one chunk, reused for every part and every collective of the calling thread (it
/// stays in cache and mapped); in-process nowhere (the channel's own tensor, which costs no
/// copy there).
class reduce_landing {
 public:
  reduce_landing(const channel& ch, int peer) : remote_(ch.send_copies(peer)) {}
  tensor operator()(range r) const;

 private:
  bool remote_;
};

}  // namespace cohort::transport::detail
