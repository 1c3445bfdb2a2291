// The transport seam: a channel moves whole tensors between the ranks of a group.
//
// Contract (every implementation):
// - Ownership: send() takes the tensor. The sender must not write to its storage afterwards
//   (an in-process channel hands the very same storage to the receiver: zero copy).
// - Ordering: messages from one rank to another with the same tag arrive in the order they
//   were sent. Nothing is promised across different tags or different senders.
// - Matching: recv(peer, tag) takes the oldest message from `peer` carrying `tag`; messages
//   with other tags wait for their own recv.
// - Threading: each rank's endpoint is used by one thread at a time; different ranks'
//   endpoints may be used concurrently (N ranks as N threads).
// - Timeouts: every wait is bounded. Running out of time is errc::timeout, a closed channel
//   errc::closed; both are values, never a hang or an exception.
//
//   in_process_fabric fabric(2);               // 2 ranks in one process
//   std::thread peer([&] {
//     channel& ch = fabric.endpoint(1);
//     status a = ch.send(0, /*tag=*/7, tensor::full({4}, 1.f), 1s);   // the tensor is the receiver's now
//     status b = ch.send(0, /*tag=*/8, tensor::full({4}, 2.f), 1s);
//   });
//   channel& me = fabric.endpoint(0);
//   result<tensor> r = me.recv(/*peer=*/1, 7, 30s);
//   tensor buf = tensor::empty({4});
//   auto r2 = me.recv_landing(1, 8, buf, 30s);  // possibly a view of buf (between processes)
//   peer.join();
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "graph/error.hpp"
#include "graph/tensor.hpp"

namespace cohort::transport {

using std::chrono::milliseconds;

class channel {
 public:
  virtual ~channel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Hands `t` to `peer` under `tag`; may wait up to `timeout` for room to send.
  virtual status send(int peer, std::uint64_t tag, tensor t, milliseconds timeout) = 0;
  /// The oldest message from `peer` under `tag`, waiting up to `timeout` for it.
  virtual result<tensor> recv(int peer, std::uint64_t tag, milliseconds timeout) = 0;
  /// Whether send() to `peer` is done with the tensor's storage when it returns (it was
  /// copied to a socket or shared memory): then a view may be sent and written afterwards.
  virtual bool send_copies(int /*peer*/) const { return false; }
  /// For collectives that send a large piece in chunks (pieces go whole where send() does not
  /// copy): the first chunk's size in bytes. Small where the receiver can start on a chunk
  /// while later ones travel (TCP); large where each message costs a rendezvous (UCX). Both
  /// ends of a pair must answer alike (they run the same fabric).
  virtual std::int64_t first_chunk_bytes(int /*peer*/) const { return std::int64_t{256} << 10; }
  /// How many bytes a rank may send to `peer` ahead of receiving anything, sure that they go
  /// at once into buffers on the way (the kernel's socket buffers) rather than wait for the
  /// peer. Recursive doubling sends a buffer up to this size whole before it reads the
  /// peer's: both sides copy out in one stretch and then find the peer's data waiting, instead
  /// of waiting for it chunk by chunk. 0 (the default): one chunk ahead.
  virtual std::int64_t send_ahead_bytes(int /*peer*/) const { return 0; }
  /// recv(), offering `landing` (contiguous) as the place for the payload: fabrics between
  /// processes that see the message begin while the caller waits write it there and return a
  /// view of `landing` (no buffer of their own, no copy); otherwise, and by default, the
  /// channel's own tensor. Either way nothing writes to `landing` once the call has returned
  /// (UCX cannot stop a receive it has matched: a UCX fabric whose rank gives up while the
  /// payload arrives closes itself).
  virtual result<tensor> recv_landing(int peer, std::uint64_t tag, const tensor& /*landing*/, milliseconds timeout) {
    return recv(peer, tag, timeout);
  }

 protected:
  /// For implementations: errc::invalid_argument ("send: rank 0 to nonexistent peer 9")
  /// unless `peer` is a rank of the group.
  status check_peer(int peer, bool sending) const {
    if (peer >= 0 && peer < size()) return {};
    return make_error(errc::invalid_argument, std::string(sending ? "send: rank " : "recv: rank ") +
                                                  std::to_string(rank()) + (sending ? " to" : " from") +
                                                  " nonexistent peer " + std::to_string(peer));
  }
};

}  // namespace cohort::transport
