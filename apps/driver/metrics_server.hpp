// A small HTTP endpoint for Prometheus: --metrics.listen=HOST:PORT serves GET /metrics with the
// text that `text()` returns at each request (the Prometheus text exposition format, 0.0.4),
// from a thread of its own. Loopback by default; any other address needs the job secret, which
// a scraper presents as `Authorization: Bearer SECRET` (a request without it gets 401). One
// request per connection, read with a deadline and a size bound; anything but GET /metrics is
// answered 404 (or 405 for another method).
//
//   auto server = metrics_server::start("127.0.0.1:0", /*secret=*/"", [] { return std::string("cohort_step 3\n"); });
//   if (!server) return server.error();            // a malformed address, a port in use (named)
//   int port = (*server)->port();                  // curl http://127.0.0.1:PORT/metrics
//   server->reset();                               // stops the thread
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "graph/error.hpp"
#include "transport/socket.hpp"

namespace cohort::apps {

class metrics_server {
 public:
  /// Listens on `host_port` ("HOST:PORT", port 0: any free one). Errors (errc::invalid_argument):
  /// a malformed address, a non-loopback host without a secret; errc::io_error: cannot bind.
  static result<std::unique_ptr<metrics_server>> start(const std::string& host_port, std::string secret,
                                                       std::function<std::string()> text);
  ~metrics_server();
  metrics_server(const metrics_server&) = delete;
  metrics_server& operator=(const metrics_server&) = delete;
  int port() const { return listener_.port(); }
  /// Requests answered with the metrics so far.
  int scrapes() const { return scrapes_.load(); }

 private:
  metrics_server(transport::tcp_listener l, std::string secret, std::function<std::string()> text);
  void serve();
  void answer(transport::tcp_socket& s);

  transport::tcp_listener listener_;
  std::string secret_;
  std::function<std::string()> text_;
  std::atomic<bool> stop_{false};
  std::atomic<int> scrapes_{0};
  std::thread thread_;
};

/// Splits "HOST:PORT". Errors name `option`.
result<std::pair<std::string, int>> split_host_port(const std::string& text, const std::string& option);

}  // namespace cohort::apps
