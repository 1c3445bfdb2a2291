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
// assumes an isolated network (docs/processes.md).
//
//   auto f = ucx_fabric::create(o);                         // o: as for the TCP fabric
//   std::string my_address = f->address();                  // exchanged via the control plane
//   f->connect(addresses);                                   // every process's address, by process
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/fabric.hpp"
#include "transport/tcp_fabric.hpp"

namespace cohort::transport {

class ucx_fabric : public fabric {
 public:
  /// The UCX context and worker (no connections yet). Errors: UCX cannot start.
  static result<std::shared_ptr<ucx_fabric>> create(const tcp_fabric_options& o);
  ~ucx_fabric() override;

  /// This worker's address, as bytes to hand to the other processes.
  const std::string& address() const;
  /// Endpoints to every other process, from their addresses (by process; this one's ignored).
  status connect(const std::vector<std::string>& addresses);

  int size() const override;
  bool is_local(int rank) const override;
  channel& endpoint(int rank) override;
  void close(const std::string& why) override;
  std::string closed_reason() const override;

  struct impl;  // public so the progress thread's callbacks can name it; defined in the .cpp

 private:
  explicit ucx_fabric(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

/// Hex for addresses that travel as text.
std::string to_hex(const std::string& bytes);
result<std::string> from_hex(const std::string& hex);

}  // namespace cohort::transport
