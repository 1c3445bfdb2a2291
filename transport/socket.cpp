// POSIX sockets behind deadlines: every blocking call goes through poll() first.
#include "transport/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

namespace cohort::transport {
namespace {

using clock = std::chrono::steady_clock;

error sys_error(const std::string& what) { return {errc::io_error, what + ": " + std::strerror(errno)}; }

int remaining_ms(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits for `events` on fd until the deadline: 1 ready, 0 timed out, -1 error.
int wait_for(int fd, short events, clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    return n > 0 ? 1 : 0;
  }
}

result<sockaddr_in> resolve(const std::string& host, int port) {
  if (port < 0 || port > 65535)
    return make_error(errc::invalid_argument, "port " + std::to_string(port) + " out of range");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, h.c_str(), &a.sin_addr) == 1) return a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(h.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    return make_error(errc::invalid_argument, "cannot resolve host '" + host + "'");
  a.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return a;
}

std::string name_of(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

}  // namespace

tcp_socket::~tcp_socket() {
  if (fd_ >= 0) ::close(fd_);
}

tcp_socket& tcp_socket::operator=(tcp_socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

result<tcp_socket> tcp_socket::connect(const std::string& host, int port, milliseconds timeout) {
  auto addr = resolve(host, port);
  if (!addr) return addr.error();
  const auto deadline = clock::now() + timeout;
  std::string last = "timed out";
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return sys_error("socket");
    tcp_socket s(fd);
    int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in));
    if (rc < 0 && errno == EINPROGRESS) {
      if (wait_for(fd, POLLOUT, deadline) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      int flags = ::fcntl(fd, F_GETFL);
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return s;
    }
    last = std::strerror(errno);
    if (clock::now() >= deadline)
      return make_error(errc::timeout, "connect to " + host + ":" + std::to_string(port) + " failed for " +
                                           std::to_string(timeout.count()) + " ms: " + last);
    std::this_thread::sleep_for(milliseconds(20));
  }
}

status tcp_socket::send_all(const void* data, std::size_t bytes, milliseconds timeout) {
  return send_all(data, bytes, nullptr, 0, timeout);
}

status tcp_socket::send_all(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes,
                            milliseconds timeout, const std::function<bool()>& on_readable) {
  const auto deadline = clock::now() + timeout;
  iovec iov[2] = {{const_cast<void*>(a), a_bytes}, {const_cast<void*>(b), b_bytes}};
  int first = 0;
  bool listen_in = true;  // false right after on_readable found nothing to do (someone else reads)
  while (first < 2) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    msghdr m{};
    m.msg_iov = iov + first;
    m.msg_iovlen = static_cast<std::size_t>(2 - first);
    ssize_t n = ::sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (on_readable) {  // wait for room or for incoming data, whichever comes first
          pollfd p{fd_, static_cast<short>(POLLOUT | (listen_in ? POLLIN : 0)), 0};
          int n = ::poll(&p, 1, listen_in ? remaining_ms(deadline) : std::min(1, remaining_ms(deadline)));
          if (n < 0 && errno != EINTR) return sys_error("send to " + peer_name());
          if (n > 0 && (p.revents & POLLIN) != 0)
            listen_in = on_readable();
          else
            listen_in = true;
          if (n == 0 && clock::now() >= deadline)
            return make_error(errc::timeout,
                              "send to " + peer_name() + ": no room for " + std::to_string(timeout.count()) + " ms");
          continue;
        }
        int w = wait_for(fd_, POLLOUT, deadline);
        if (w == 0)
          return make_error(errc::timeout,
                            "send to " + peer_name() + ": no room for " + std::to_string(timeout.count()) + " ms");
        if (w < 0) return sys_error("send to " + peer_name());
        continue;
      }
      if (errno == EPIPE || errno == ECONNRESET)
        return make_error(errc::closed, "send to " + peer_name() + ": the peer closed the connection");
      return sys_error("send to " + peer_name());
    }
    auto left = static_cast<std::size_t>(n);
    while (first < 2 && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      iov[first].iov_len = 0;
      ++first;
    }
    if (first < 2) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return {};
}

status tcp_socket::recv_exact(void* data, std::size_t bytes, milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd_, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return make_error(errc::closed, "the peer " + peer_name() + " closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int w = wait_for(fd_, POLLIN, deadline);
      if (w == 0)
        return make_error(errc::timeout,
                          "receive from " + peer_name() + ": nothing for " + std::to_string(timeout.count()) + " ms");
      if (w < 0) return sys_error("receive from " + peer_name());
      continue;
    }
    if (errno == ECONNRESET) return make_error(errc::closed, "the peer " + peer_name() + " reset the connection");
    return sys_error("receive from " + peer_name());
  }
  return {};
}

result<std::size_t> tcp_socket::read_some(void* data, std::size_t bytes) {
  for (;;) {
    ssize_t n = ::recv(fd_, data, bytes, MSG_DONTWAIT);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == 0 && bytes > 0) return make_error(errc::closed, "the peer " + peer_name() + " closed the connection");
    if (n == 0) return std::size_t{0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::size_t{0};
    if (errno == ECONNRESET) return make_error(errc::closed, "the peer " + peer_name() + " reset the connection");
    return sys_error("receive from " + peer_name());
  }
}

bool tcp_socket::wait_readable(milliseconds timeout) const {
  return wait_for(fd_, POLLIN, clock::now() + timeout) != 0;
}

event_fd::event_fd() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}
event_fd::~event_fd() {
  if (fd_ >= 0) ::close(fd_);
}
void event_fd::signal() {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto put = ::write(fd_, &one, sizeof one);
}

bool tcp_socket::wait_readable(milliseconds timeout, int wake_fd) const {
  const auto deadline = clock::now() + timeout;
  for (;;) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int n = ::poll(p, 2, remaining_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (p[1].revents & POLLIN) {  // woken: consume the wake-up
      std::uint64_t count = 0;
      [[maybe_unused]] auto got = ::read(wake_fd, &count, sizeof count);
    }
    return (p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
}

void tcp_socket::set_buffers(int bytes) {
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

std::int64_t tcp_socket::send_buffer_bytes() const {
  int bytes = 0;
  socklen_t len = sizeof bytes;
  if (fd_ < 0 || ::getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, &len) != 0) return 0;
  return bytes / 2;
}

void tcp_socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

std::string tcp_socket::peer_name() const {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (fd_ < 0 || ::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  return name_of(a);
}

std::string tcp_socket::peer_host() const {
  std::string n = peer_name();
  return n.substr(0, n.rfind(':'));
}

tcp_listener::~tcp_listener() { close(); }

tcp_listener& tcp_listener::operator=(tcp_listener&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    port_ = o.port_;
    o.fd_ = -1;
  }
  return *this;
}

void tcp_listener::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

result<tcp_listener> tcp_listener::open(const std::string& host, int port) {
  auto addr = resolve(host, port);
  if (!addr) return addr.error();
  tcp_listener l;
  l.fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l.fd_ < 0) return sys_error("socket");
  int one = 1;
  ::setsockopt(l.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(l.fd_, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in)) != 0)
    return sys_error("bind " + host + ":" + std::to_string(port));
  if (::listen(l.fd_, 64) != 0) return sys_error("listen on " + host + ":" + std::to_string(port));
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ::getsockname(l.fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  l.port_ = ntohs(bound.sin_port);
  return l;
}

result<tcp_listener> tcp_listener::adopt(int fd) {
  int listening = 0;
  socklen_t n = sizeof listening;
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &n) != 0 || listening == 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0 || bound.sin_family != AF_INET)
    return make_error(errc::invalid_argument,
                      "file descriptor " + std::to_string(fd) + " is not a listening TCP socket");
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not handed on again
  tcp_listener l;
  l.fd_ = fd;
  l.port_ = ntohs(bound.sin_port);
  return l;
}

result<tcp_socket> tcp_listener::accept(milliseconds timeout) {
  if (fd_ < 0) return make_error(errc::closed, "accept: the listener is closed");
  int w = wait_for(fd_, POLLIN, clock::now() + timeout);
  if (w == 0)
    return make_error(errc::timeout, "accept on port " + std::to_string(port_) + ": nobody came in " +
                                         std::to_string(timeout.count()) + " ms");
  if (w < 0) return sys_error("accept on port " + std::to_string(port_));
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return sys_error("accept on port " + std::to_string(port_));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return tcp_socket(fd);
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0; }

}  // namespace cohort::transport
