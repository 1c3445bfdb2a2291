// Receives posted with their destination buffers, so a fabric between processes lands a
// payload where the receiver wants it (no buffer of its own, no copy afterwards). One
// posting per local rank at a time (a rank's endpoint is used by one thread). Not
// synchronised: the fabric guards it with the lock its frame delivery runs under. The
// fabric posts only when no message the posting would match has arrived or begun arriving:
// the first frame to claim it must be the one the waiting receive returns.
//
//   posted_receives posted(/*ranks=*/2);
//   const int me = 0, from = 1;
//   const std::uint64_t tag = 7;
//   tensor into = tensor::empty({256});
//   posted.post(me, from, tag, into);                 // before waiting
//   // the fabric, when a frame for `me` begins (under its delivery lock):
//   if (auto dst = posted.claim(me, from, tag, dtype::f32, shape{256})) {
//     dst->fill(1.f);                                 // read_payload_into(*dst)
//     posted.complete(me, *dst);                      // once the frame is whole
//   }
//   auto s = posted.withdraw(me);                     // after waiting: waiting / landing / landed
//   assert(s == posted_receives::state::landed && into.at(0) == 1.f);
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/tensor.hpp"

namespace cohort::transport {

class posted_receives {
 public:
  enum class state { none, waiting, landing, landed };

  explicit posted_receives(int ranks) : entries_(static_cast<std::size_t>(ranks)) {}

  /// Rank `me` waits for the next message from `from` under `tag`, to land in `into`.
  void post(int me, int from, std::uint64_t tag, const tensor& into);

  /// A frame for `to` from `from` under `tag` of `type` and `s` begins: the buffer to land it
  /// in (a view of the posted one, shaped `s`), when `to` posted for exactly this message and
  /// the sizes agree; nullopt otherwise (the fabric allocates as usual).
  std::optional<tensor> claim(int to, int from, std::uint64_t tag, dtype type, const shape& s);

  /// The frame for `to` in `body` is whole: if it landed in the posted buffer, say so.
  void complete(int to, const tensor& body);

  /// Ends `me`'s posting: what became of it (waiting: nothing came; landing: a payload is
  /// being written into the buffer now; landed: the message is whole in the buffer).
  state withdraw(int me);

  /// Whether `body` is a view of rank `to`'s posted buffer.
  bool aliases(int to, const tensor& body) const;

 private:
  struct entry {
    state at = state::none;
    int from = -1;
    std::uint64_t tag = 0;
    tensor into;
  };
  std::vector<entry> entries_;
};

}  // namespace cohort::transport
