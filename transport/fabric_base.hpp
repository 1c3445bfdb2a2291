// What the fabrics between processes (TCP, UCX) share: the ranks this process hosts and their
// mailboxes; endpoints that validate and route every send and receive (to a local rank's
// mailbox without copying, or to the fabric's remote path); closing with a reason; checking
// that a frame's ranks live where it claims; and receives whose payload lands in a buffer the
// caller offered (posted_receives), offered and withdrawn under the lock that guards the
// fabric's frame delivery.
//
// A derived fabric supplies only what moves data between processes:
//   send_remote(from, to, tag, t, timeout)     a frame to a rank of another process
//   recv_remote(me, from, tag, timeout)        the wait for a message from another process
//   landing_site_of(from)                      where it posts offered buffers for `from`
// and, where it needs them, on_close() (wake its own waiters) and recv_local() (a wait on a
// rank of this process; by default the mailbox alone).
//
//   // A fabric whose "other processes" are unreachable: the smallest complete derived fabric.
//   class island_fabric : public fabric_base {
//    public:
//     island_fabric(std::vector<int> process_of_rank, int me) : fabric_base("island_fabric", std::move(process_of_rank), me) {
//       make_endpoints<local_endpoint>(*this);
//     }
//     ~island_fabric() override { close("island_fabric: destroyed"); }
//    private:
//     status send_remote(int, int to, std::uint64_t, tensor, milliseconds) override {
//       return make_error(errc::unsupported, "island_fabric: no path to rank " + std::to_string(to));
//     }
//     result<tensor> recv_remote(int, int from, std::uint64_t, milliseconds) override {
//       return make_error(errc::unsupported, "island_fabric: no path from rank " + std::to_string(from));
//     }
//     struct nowhere : landing_site {   // nothing arrives from another process, so nothing lands
//       std::mutex m;
//       posted_receives none{0};
//       std::mutex& lock() override { return m; }
//       posted_receives& posted() override { return none; }
//       bool arriving(int, int, std::uint64_t) const override { return false; }
//       bool detach(int) override { return true; }
//     } site_;
//     landing_site& landing_site_of(int) override { return site_; }
//   };
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/fabric.hpp"
#include "transport/mailbox.hpp"
#include "transport/posted_receives.hpp"
#include "transport/wire.hpp"

namespace cohort::transport {

class fabric_base : public fabric {
 public:
  ~fabric_base() override;

  int size() const final { return static_cast<int>(process_of_rank_.size()); }
  bool is_local(int rank) const final { return rank >= 0 && rank < size() && process_of(rank) == process_; }
  /// A local rank's endpoint; std::invalid_argument ("tcp_fabric: rank 3 is not in this process") otherwise.
  channel& endpoint(int rank) final;
  void close(const std::string& why) final;
  std::string closed_reason() const final;
  std::uint64_t bytes_to_other_processes() const final { return remote_bytes_.load(std::memory_order_relaxed); }

  /// recv_landing() in two steps, for a receiver that must know its buffer is offered before
  /// the sender sends (it tells the sender in between). offer_landing(): the message if it
  /// has come already (then there is nothing to wait for); otherwise `landing` is offered for
  /// it. wait_landing(), once after an offer that returned no message: recv_landing()'s wait.
  /// Errors (errc::invalid_argument): `me` not local, `from` not a rank of another process,
  /// `landing` not contiguous.
  result<std::optional<tensor>> offer_landing(int me, int from, std::uint64_t tag, const tensor& landing);
  result<tensor> wait_landing(int me, int from, std::uint64_t tag, milliseconds timeout);

 protected:
  // Where a fabric lands the payloads of messages from one peer process.
  class landing_site {
   public:
    virtual ~landing_site() = default;
    /// Guards posted() and the delivery of frames from the peer process.
    virtual std::mutex& lock() = 0;
    virtual posted_receives& posted() = 0;
    /// Under lock(): whether the message to `me` from `from` under `tag` has begun arriving
    /// into a buffer of its own (offering one then would let the next such message land there).
    virtual bool arriving(int me, int from, std::uint64_t tag) const = 0;
    /// Under lock(), the wait over: moves a payload still landing in `me`'s offered buffer
    /// into one of its own; false when that cannot be done (the fabric then closes itself).
    virtual bool detach(int me) = 0;
  };

  // One local rank's channel: checks the peer, then a local send or receive goes through the
  // mailboxes, a remote one through the derived fabric.
  class local_endpoint : public channel {
   public:
    local_endpoint(fabric_base& f, int rank) : f_(f), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return f_.size(); }
    status send(int peer, std::uint64_t tag, tensor t, milliseconds timeout) override;
    result<tensor> recv(int peer, std::uint64_t tag, milliseconds timeout) override;
    result<tensor> recv_landing(int peer, std::uint64_t tag, const tensor& landing, milliseconds timeout) override;
    bool send_copies(int peer) const override { return !f_.is_local(peer); }

   private:
    fabric_base& f_;
    int rank_;
  };

  /// `name` prefixes endpoint()'s error; process_of_rank: rank -> the process hosting it.
  fabric_base(std::string name, std::vector<int> process_of_rank, int process);
  /// The local ranks' endpoints (Endpoint: local_endpoint or a subclass made from (Fabric&, rank)).
  template <class Endpoint, class Fabric>
  void make_endpoints(Fabric& f) {
    for (int r = 0; r < size(); ++r) endpoints_.push_back(is_local(r) ? std::make_unique<Endpoint>(f, r) : nullptr);
  }

  int process_of(int rank) const { return process_of_rank_[static_cast<std::size_t>(rank)]; }
  /// A local rank's mailbox.
  mailbox& box(int rank) { return *boxes_[static_cast<std::size_t>(rank)]; }
  bool is_closed() const;
  /// Whether a frame that came from process `p` may be delivered: its source rank lives in
  /// `p`, its destination here. The source must be a rank (decode_limits::ranks). Per frame,
  /// so inline; route_problem() says why not.
  bool routed(const frame_meta& m, int p) const {
    return process_of(static_cast<int>(m.source)) == p && is_local(static_cast<int>(m.destination));
  }
  /// Why routed() refuses a frame: "source rank 3 does not live in process 1", or
  /// "destination rank 2 does not live in this process".
  std::string route_problem(const frame_meta& m, int p) const;

  /// A message from local rank `from` to rank `to` of another process.
  virtual status send_remote(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout) = 0;
  /// Local rank `me` waits for a message from rank `from` of another process.
  virtual result<tensor> recv_remote(int me, int from, std::uint64_t tag, milliseconds timeout) = 0;
  /// Local rank `me` waits for a message from local rank `from` (by default: its mailbox).
  virtual result<tensor> recv_local(int me, int from, std::uint64_t tag, milliseconds timeout);
  /// Where messages from remote rank `from` land.
  virtual landing_site& landing_site_of(int from) = 0;
  /// After close() has set the reason and closed the mailboxes.
  virtual void on_close() {}

 private:
  status send_local(int from, int to, std::uint64_t tag, tensor t);
  result<tensor> recv_landing_remote(int me, int from, std::uint64_t tag, const tensor& landing, milliseconds timeout);
  std::optional<tensor> offer(int me, int from, std::uint64_t tag, const tensor& landing);
  result<tensor> wait_offered(int me, int from, std::uint64_t tag, milliseconds timeout);
  status check_landing(int me, int from, const tensor& landing) const;

  const std::string name_;
  const std::vector<int> process_of_rank_;
  const int process_;
  std::vector<std::unique_ptr<mailbox>> boxes_;      // by rank (local ranks only)
  std::vector<std::unique_ptr<channel>> endpoints_;  // by rank (local ranks only)
  mutable std::mutex mutex_;
  std::string closed_why_;
  std::atomic<std::uint64_t> remote_bytes_{0};
};

}  // namespace cohort::transport
