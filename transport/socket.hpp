// TCP sockets with deadlines: listen, accept, connect (retrying until the peer listens),
// and whole-buffer sends and receives that wait at most a given time. Every failure is an
// error value naming the address and what went wrong; a peer that closed is errc::closed.
//
//   auto l = tcp_listener::open("127.0.0.1", 0);            // port 0: any free port
//   if (!l) return l.error();
//   auto s = tcp_socket::connect("127.0.0.1", l->port(), 5s);
//   if (!s) return s.error();
//   auto a = l->accept(5s);
//   if (!a) return a.error();
//   const char ping[4] = {'p', 'i', 'n', 'g'};
//   char got[4];
//   if (auto st = s->send_all(ping, sizeof ping, 1s); !st) return st;
//   if (auto st = a->recv_exact(got, sizeof got, 1s); !st) return st;   // errc::closed: the peer closed first
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "graph/error.hpp"

namespace cohort::transport {

using std::chrono::milliseconds;

class tcp_socket {
 public:
  tcp_socket() = default;
  explicit tcp_socket(int fd) : fd_(fd) {}
  ~tcp_socket();
  tcp_socket(tcp_socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  tcp_socket& operator=(tcp_socket&& o) noexcept;

  /// Connects to host:port, retrying refused connections until `timeout` (the peer may not
  /// be listening yet). TCP_NODELAY is set.
  static result<tcp_socket> connect(const std::string& host, int port, milliseconds timeout);

  status send_all(const void* data, std::size_t bytes, milliseconds timeout);
  /// Two buffers in one gather write (a frame's header and its payload). While the socket
  /// has no room and `on_readable` is given, incoming data calls it (a full-duplex peer is
  /// drained by the same thread); it returns whether it read anything.
  status send_all(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, milliseconds timeout,
                  const std::function<bool()>& on_readable = {});
  /// What is there to read, up to `bytes`, without waiting: 0 when nothing is; errc::closed
  /// when the peer closed.
  result<std::size_t> read_some(void* data, std::size_t bytes);
  /// Exactly `bytes` bytes; errc::closed when the peer closes first, errc::timeout when late.
  status recv_exact(void* data, std::size_t bytes, milliseconds timeout);
  /// Waits until there is something to read (or the peer closed): false on timeout.
  bool wait_readable(milliseconds timeout) const;
  /// The same, and also returns (false) when `wake_fd` (an eventfd) becomes readable,
  /// consuming its count: another thread cuts the wait short.
  bool wait_readable(milliseconds timeout, int wake_fd) const;

  /// Kernel buffers of `bytes` each way (capped by net.core.[rw]mem_max): a large message is
  /// handed to the kernel without waiting for the peer to read it.
  void set_buffers(int bytes);
  /// The send buffer the kernel gives the socket, in bytes of payload it holds (half of what
  /// SO_SNDBUF reports: the kernel doubles the request for its own bookkeeping); 0 on error.
  std::int64_t send_buffer_bytes() const;
  /// Ends both directions: a thread blocked reading this socket wakes with errc::closed.
  void shutdown();
  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  /// "127.0.0.1:41234" of the other side ("?" when unknown).
  std::string peer_name() const;
  /// The peer's IPv4 address as text.
  std::string peer_host() const;

 private:
  int fd_ = -1;
};

class tcp_listener {
 public:
  tcp_listener() = default;
  ~tcp_listener();
  tcp_listener(tcp_listener&& o) noexcept : fd_(o.fd_), port_(o.port_) { o.fd_ = -1; }
  tcp_listener& operator=(tcp_listener&& o) noexcept;

  /// Binds host:port (IPv4 address text; port 0 picks a free one) and listens.
  static result<tcp_listener> open(const std::string& host, int port);
  /// A listening TCP socket this process was handed (a launcher's, inherited across exec):
  /// errors when `fd` is not one.
  static result<tcp_listener> adopt(int fd);
  result<tcp_socket> accept(milliseconds timeout);
  int port() const { return port_; }
  int fd() const { return fd_; }
  void close();

 private:
  int fd_ = -1;
  int port_ = 0;
};

/// An eventfd: one thread signals, another's poll() on it wakes (tcp_socket::wait_readable).
class event_fd {
 public:
  event_fd();
  ~event_fd();
  event_fd(const event_fd&) = delete;
  event_fd& operator=(const event_fd&) = delete;
  void signal();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

/// Whether `host` is a loopback address (127.0.0.0/8 or "localhost").
bool is_loopback(const std::string& host);

}  // namespace cohort::transport
