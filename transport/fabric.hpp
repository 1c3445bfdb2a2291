// A fabric: the channels of one job's ranks, as this process sees them. The in-process
// fabric holds every rank; the TCP fabric holds this process's ranks and reaches the others
// over sockets. Closing a fabric wakes every waiter with errc::closed and the reason given,
// so ranks blocked on a peer that died or hung are released at once.
//
//   std::shared_ptr<fabric> f = std::make_shared<in_process_fabric>(4);
//   int rank = 2;
//   channel& me = f->endpoint(rank);            // rank must be local to this process
//   f->close("rank 3's process died");          // later sends and receives fail with this
//   result<tensor> r = me.recv(3, /*tag=*/0, 1s);   // !r: errc::closed, "... rank 3's process died"
//   assert(!r && r.error().code == errc::closed && f->closed_reason() == "rank 3's process died");
#pragma once

#include <string>

#include "transport/channel.hpp"

namespace cohort::transport {

class fabric {
 public:
  virtual ~fabric() = default;
  /// Ranks in the job (local and remote).
  virtual int size() const = 0;
  /// Whether `rank`'s endpoint lives in this process.
  virtual bool is_local(int rank) const = 0;
  /// A local rank's endpoint.
  virtual channel& endpoint(int rank) = 0;
  /// Wakes all waiters with errc::closed naming `why`; later sends and receives fail the same way.
  virtual void close(const std::string& why) = 0;
  /// Why the fabric was closed (empty while open).
  virtual std::string closed_reason() const = 0;
  /// Payload bytes this process's ranks have sent to ranks of other processes (0 for a fabric
  /// within one process).
  virtual std::uint64_t bytes_to_other_processes() const { return 0; }

  /// How many ranks live in this process.
  int local_ranks() const {
    int n = 0;
    for (int r = 0; r < size(); ++r) n += is_local(r) ? 1 : 0;
    return n;
  }
};

}  // namespace cohort::transport
