// The UCX data plane: the same contract as the TCP fabric (transport/tcp_fabric.hpp), over
// UCX tag messages, so processes on one host talk through shared memory (UCX's shm/cma
// transports) and across hosts over UCX's TCP (or RDMA where the build has it).
//
// One UCX worker per process, driven by one progress thread that makes every UCX call (the
// worker is single-threaded). A send hands the frame to that thread and waits for its
// completion (or the timeout, or the fabric closing). Each tensor travels as two messages:
// a header (the wire frame's header and shape) and the payload; the progress thread
// validates the header exactly like the TCP reader, allocates the tensor and receives the
// payload straight into it. The progress thread sleeps on the worker's event fd when idle.
//
// Failure detection: endpoints use UCX's error mode NONE, which is what allows shared
// memory; a dead or hung peer is found by the control plane's heartbeats, which close the
// fabric and so wake every waiting rank. UCX traffic is not authenticated: the data plane
// assumes an isolated network (docs/processes.md). Routing, local sends, closing and
// offered landing buffers are fabric_base's (transport/fabric_base.hpp), as for TCP.
//
//   // One process's UCX data plane, the workers' addresses exchanged over the control plane:
//   result<std::shared_ptr<ucx_fabric>> ucx_data_plane(control_plane& control, const tcp_fabric_options& o) {
//     auto f = ucx_fabric::create(o);                         // o: as for the TCP fabric
//     if (!f) return f.error();                               // UCX cannot start here
//     auto hex = control.all_gather_text(/*key=*/3, to_hex((*f)->address()));   // by process
//     if (!hex) return hex.error();
//     std::vector<std::string> addresses;
//     for (const std::string& h : *hex) {
//       auto a = from_hex(h);
//       if (!a) return a.error();
//       addresses.push_back(*a);
//     }
//     if (auto st = (*f)->connect(addresses); !st) return st.error();   // every process's, by process
//     return f;
//   }
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/fabric_base.hpp"
#include "transport/tcp_fabric.hpp"

namespace cohort::transport {

class ucx_fabric : public fabric_base {
 public:
  /// The UCX context and worker (no connections yet). Errors: UCX cannot start.
  static result<std::shared_ptr<ucx_fabric>> create(const tcp_fabric_options& o);
  ~ucx_fabric() override;

  /// This worker's address, as bytes to hand to the other processes.
  const std::string& address() const;
  /// Endpoints to every other process, from their addresses (by process; this one's ignored).
  status connect(const std::vector<std::string>& addresses);

  struct impl;  // public so the progress thread's callbacks can name it; defined in the .cpp

 private:
  explicit ucx_fabric(const tcp_fabric_options& o);
  status send_remote(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout) override;
  result<tensor> recv_remote(int me, int from, std::uint64_t tag, milliseconds timeout) override;
  result<tensor> recv_local(int me, int from, std::uint64_t tag, milliseconds timeout) override;
  landing_site& landing_site_of(int from) override;
  void on_close() override;
  std::unique_ptr<impl> p_;
};

/// Hex for addresses that travel as text.
std::string to_hex(const std::string& bytes);
result<std::string> from_hex(const std::string& hex);

}  // namespace cohort::transport
