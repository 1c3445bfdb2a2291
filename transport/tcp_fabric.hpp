// The TCP data plane: this process's ranks reach the ranks of other processes over one TCP
// connection per pair of processes (a full mesh), carrying wire frames (transport/wire.hpp).
// Ranks in the same process exchange through mailboxes without copying, as in-process.
//
// Every connection starts with the job-secret handshake (transport/auth.hpp) and a hello
// frame naming the connecting process and the generation. A reader thread per connection
// validates every frame before use: the header against the limits, the source rank against
// the ranks that process hosts, the destination against this process's ranks, the shape
// against the payload size; a bad frame or a closed connection closes the fabric with a
// reason that names the peer, which wakes every waiting rank. A rank waiting in recv_landing()
// has posted its buffer: the payload of the message it waits for is read straight into it.
// Routing, local sends, closing and offered buffers are fabric_base's (fabric_base.hpp).
//
//   auto listener = tcp_listener::open("127.0.0.1", 0);       // this process's data port
//   if (!listener) return listener.error();
//   tcp_fabric_options o;
//   o.process_of_rank = {0, 1};  o.process = 0;  o.generation = 1;
//   o.peers = {{"127.0.0.1", listener->port()}, {"127.0.0.1", 29601}};   // every process's port (the roster)
//   auto f = tcp_fabric::connect(*listener, o);   // connects to the processes after this one, accepts those before
//   if (!f) return f.error();
//   if (auto st = (*f)->endpoint(0).send(1, /*tag=*/7, tensor::full({4}, 1.f), 5s); !st) return st;
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/fabric_base.hpp"
#include "transport/socket.hpp"

namespace cohort::transport {

struct process_address {
  std::string host;
  int port = 0;
};

struct tcp_fabric_options {
  std::vector<int> process_of_rank;    // rank -> the process hosting it
  int process = 0;                     // this process
  std::vector<process_address> peers;  // every process's data listener, by process
  std::vector<bool> members;           // the processes to connect (empty: all; after a loss, those that remain)
  std::uint64_t generation = 1;
  std::string secret;           // the job secret ("" on loopback-only jobs)
  milliseconds timeout{30000};  // connecting, the handshake, and one frame's body
  /// Asked every 100 ms while this process waits for a peer to connect: true when that wait
  /// cannot end well (a member of this data plane is gone): it ends at once (errc::closed).
  std::function<bool()> abandon;
};

class tcp_fabric : public fabric_base {
 public:
  /// Connects to every other member process (to those after this one; accepts those before it on
  /// `listener`). Errors: a peer that does not come within the timeout, fails the handshake
  /// or names itself wrongly.
  static result<std::shared_ptr<tcp_fabric>> connect(tcp_listener& listener, const tcp_fabric_options& o);
  ~tcp_fabric() override;

 private:
  struct connection;
  class endpoint_impl;
  explicit tcp_fabric(const tcp_fabric_options& o);
  status send_remote(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout) override;
  result<tensor> recv_remote(int me, int from, std::uint64_t tag, milliseconds timeout) override;
  landing_site& landing_site_of(int from) override;
  void read_loop(int process);
  /// Reads what is there on `c` (read lock held), delivering every frame it completes.
  status pump(connection& c, int process);
  static result<std::size_t> read_piece(connection& c, std::byte* target, std::size_t want);

  tcp_fabric_options o_;
  std::vector<std::unique_ptr<connection>> conns_;  // by process (null for this one)
  std::vector<std::thread> readers_;
  std::atomic<bool> stopping_{false};
};

}  // namespace cohort::transport
