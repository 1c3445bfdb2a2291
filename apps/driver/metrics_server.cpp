// The Prometheus endpoint's HTTP: accept, read one request (bounded), answer, close.
#include "apps/driver/metrics_server.hpp"

#include <chrono>

namespace cohort::apps {

using namespace std::chrono_literals;

result<std::pair<std::string, int>> split_host_port(const std::string& text, const std::string& option) {
  const auto bad =
      make_error(errc::invalid_argument, option + " must be HOST:PORT (e.g. 127.0.0.1:9464), got '" + text + "'");
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return bad;
  int port = 0;
  for (std::size_t i = colon + 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return bad;
    port = port * 10 + (text[i] - '0');
    if (port > 65535) return bad;
  }
  return std::make_pair(text.substr(0, colon), port);
}

result<std::unique_ptr<metrics_server>> metrics_server::start(const std::string& host_port, std::string secret,
                                                              std::function<std::string()> text) {
  auto hp = split_host_port(host_port, "--metrics.listen");
  if (!hp) return hp.error();
  if (!transport::is_loopback(hp->first) && secret.empty())
    return make_error(errc::invalid_argument,
                      "--metrics.listen=" + host_port +
                          " listens beyond this machine: set a job secret (COHORT_JOB_SECRET_FILE) that scrapers "
                          "present as a bearer token, or listen on 127.0.0.1");
  auto l = transport::tcp_listener::open(hp->first, hp->second);
  if (!l) return make_error(errc::io_error, "--metrics.listen=" + host_port + ": " + l.error().message);
  return std::unique_ptr<metrics_server>(new metrics_server(std::move(*l), std::move(secret), std::move(text)));
}

metrics_server::metrics_server(transport::tcp_listener l, std::string secret, std::function<std::string()> text)
    : listener_(std::move(l)), secret_(std::move(secret)), text_(std::move(text)), thread_([this] { serve(); }) {}

metrics_server::~metrics_server() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void metrics_server::serve() {
  while (!stop_) {
    auto s = listener_.accept(200ms);  // a short wait: the stop flag is seen soon
    if (!s) continue;
    answer(*s);
  }
}

namespace {

// Compares in time that depends on the lengths only (a token is not guessed byte by byte).
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

void reply(transport::tcp_socket& s, const std::string& status, const std::string& type, const std::string& body,
           const std::string& extra = "") {
  const std::string head = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra +
                           "\r\n";
  (void)s.send_all(head.data(), head.size(), body.data(), body.size(), 2000ms);
}

}  // namespace

void metrics_server::answer(transport::tcp_socket& s) {
  // the request's head, up to its blank line: at most 16 KiB within 2 s
  std::string req;
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  char buf[2048];
  while (req.find("\r\n\r\n") == std::string::npos) {
    if (req.size() > (16u << 10) || std::chrono::steady_clock::now() > deadline)
      return reply(s, "400 Bad Request", "text/plain", "request too large or too slow\n");
    if (!s.wait_readable(100ms)) continue;
    auto n = s.read_some(buf, sizeof buf);
    if (!n || *n == 0) return;  // the peer closed
    req.append(buf, *n);
  }
  const auto line_end = req.find("\r\n");
  const std::string line = req.substr(0, line_end);
  const auto sp1 = line.find(' '), sp2 = line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos)
    return reply(s, "400 Bad Request", "text/plain", "malformed request line\n");
  const std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (!secret_.empty()) {
    bool authorised = false;
    std::size_t at = line_end + 2;
    while (at < req.size()) {
      const auto end = req.find("\r\n", at);
      if (end == std::string::npos || end == at) break;
      const std::string header = req.substr(at, end - at);
      const std::string key = "authorization:";
      if (header.size() > key.size()) {
        std::string lower = header.substr(0, key.size());
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = header.substr(key.size());
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        if (lower == key && same_secret(value, "Bearer " + secret_)) authorised = true;
      }
      at = end + 2;
    }
    if (!authorised)
      return reply(s, "401 Unauthorized", "text/plain", "a bearer token is required\n", "WWW-Authenticate: Bearer\r\n");
  }
  if (method != "GET") return reply(s, "405 Method Not Allowed", "text/plain", "GET only\n", "Allow: GET\r\n");
  if (target != "/metrics" && target.rfind("/metrics?", 0) != 0)
    return reply(s, "404 Not Found", "text/plain", "the metrics are at /metrics\n");
  reply(s, "200 OK", "text/plain; version=0.0.4; charset=utf-8", text_());
  ++scrapes_;
}

}  // namespace cohort::apps
