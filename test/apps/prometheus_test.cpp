// The Prometheus endpoint (--metrics.listen): the HTTP rules on their own (a bearer token beyond
// loopback, 404/405/401), and a real Prometheus from Debian's package scraping a running job of
// 2 processes: the series read back through Prometheus's HTTP API hold the job's figures (the
// steps done, the final loss of the summary, 2 live processes, bytes sent between them). Where
// Prometheus is absent the test fails saying so, unless COHORT_SKIP_PROMETHEUS=1.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "apps/driver/metrics_server.hpp"
#include "support/run_files.hpp"
#include "transport/socket.hpp"

using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

std::string temp_file(const std::string& name) { return cohort::test::temp_path("prom", name); }

// One HTTP/1.0 request to 127.0.0.1:port: the status code and the body. `may_fail`: nobody
// listening, or a connection that breaks, is {-1, ""} rather than a failed check.
std::pair<int, std::string> http(int port, const std::string& request_head, bool may_fail = false) {
  auto s = cohort::transport::tcp_socket::connect("127.0.0.1", port, may_fail ? 500ms : 5000ms);
  if (may_fail && !s.ok()) return {-1, ""};
  REQUIRE_MESSAGE(s.ok(), s.error().message);
  const bool sent = s->send_all(request_head.data(), request_head.size(), 5000ms).ok();
  if (may_fail && !sent) return {-1, ""};
  REQUIRE(sent);
  std::string got;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!s->wait_readable(100ms)) continue;
    auto n = s->read_some(buf, sizeof buf);
    if (!n || *n == 0) break;
    got.append(buf, *n);
  }
  std::smatch m;
  if (!std::regex_search(got, m, std::regex("^HTTP/1\\.[01] (\\d{3})"))) return {-1, got};
  const auto body = got.find("\r\n\r\n");
  return {std::stoi(m[1]), body == std::string::npos ? "" : got.substr(body + 4)};
}

std::pair<int, std::string> get(int port, const std::string& path, const std::string& headers = "") {
  return http(port, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" + headers + "\r\n");
}

// A GET to an endpoint that may be down for a while (between a coordinator's loss and its successor's takeover).
std::pair<int, std::string> get_if_up(int port, const std::string& path) {
  return http(port, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", /*may_fail=*/true);
}

int free_port() {
  auto l = cohort::transport::tcp_listener::open("127.0.0.1", 0);
  REQUIRE(l.ok());
  return l->port();
}

// A child process running `cmd` under sh, killed (its process group) when this goes.
struct child {
  pid_t pid = -1;
  explicit child(const std::string& cmd) {
    std::fflush(nullptr);
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  int wait() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~child() {
    if (pid <= 0) return;
    ::kill(-pid, SIGTERM);
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
};

// Prometheus's latest value of `query` (an instant vector of one series), or NaN while it has none.
double prometheus_value(int port, const std::string& query) {
  auto [code, body] = get(port, "/api/v1/query?query=" + query);
  if (code != 200) return std::nan("");
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || j["status"] != "success" || j["data"]["result"].empty()) return std::nan("");
  return std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
}

}  // namespace

TEST_CASE("the metrics endpoint: a bearer token beyond loopback, 404 elsewhere, 405 for other methods") {
  auto refused = cohort::apps::metrics_server::start("0.0.0.0:0", "", [] { return std::string("x 1\n"); });
  REQUIRE(!refused.ok());
  CHECK(refused.error().code == cohort::errc::invalid_argument);
  CHECK(refused.error().message.find("job secret") != std::string::npos);
  for (const std::string bad : {"127.0.0.1", "127.0.0.1:", ":9464", "127.0.0.1:99999", "127.0.0.1:9x"}) {
    CAPTURE(bad);
    CHECK(!cohort::apps::split_host_port(bad, "--metrics.listen").ok());
  }
  auto server = cohort::apps::metrics_server::start("0.0.0.0:0", "s3cret", [] { return std::string("cohort_x 1\n"); });
  REQUIRE_MESSAGE(server.ok(), server.error().message);
  const int port = (*server)->port();
  CHECK(get(port, "/metrics").first == 401);
  CHECK(get(port, "/metrics", "Authorization: Bearer wrong\r\n").first == 401);
  auto ok = get(port, "/metrics", "Authorization: Bearer s3cret\r\n");
  CHECK(ok.first == 200);
  CHECK(ok.second == "cohort_x 1\n");
  CHECK(get(port, "/other", "Authorization: Bearer s3cret\r\n").first == 404);
  CHECK(http(port, "POST /metrics HTTP/1.0\r\nAuthorization: Bearer s3cret\r\n\r\n").first == 405);
  CHECK((*server)->scrapes() == 1);
  auto open = cohort::apps::metrics_server::start("127.0.0.1:0", "", [] { return std::string("y 2\n"); });
  REQUIRE(open.ok());
  CHECK(get((*open)->port(), "/metrics").second == "y 2\n");  // loopback: no token
}

TEST_CASE("Prometheus scrapes a running job of 2 processes and has its figures") {
  const char* prom = "/usr/bin/prometheus";
  if (!std::filesystem::exists(prom)) {
    const char* skip = std::getenv("COHORT_SKIP_PROMETHEUS");
    if (skip && std::string(skip) == "1") {
      MESSAGE("Prometheus not installed and COHORT_SKIP_PROMETHEUS=1: Prometheus checks skipped");
      return;
    }
    FAIL("Prometheus is not installed (scripts/install-deps.sh installs it; COHORT_SKIP_PROMETHEUS=1 opts out)");
  }
  const int job_port = free_port(), prom_port = free_port();
  const std::string config = temp_file("prometheus.yml"), data = temp_file("tsdb");
  std::filesystem::remove_all(data);
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                        << "  - job_name: cohort\n    static_configs:\n      - targets: ['127.0.0.1:" << job_port
                        << "']\n";
  child prometheus(std::string(prom) + " --config.file=" + config + " --storage.tsdb.path=" + data +
                   " --web.listen-address=127.0.0.1:" + std::to_string(prom_port) + " >" + temp_file("prom.out") +
                   " 2>&1");
  // Prometheus up
  const auto deadline = std::chrono::steady_clock::now() + 420s;
  bool ready = false;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
    auto s = cohort::transport::tcp_socket::connect("127.0.0.1", prom_port, 200ms);
    ready = s.ok() && get(prom_port, "/-/ready").first == 200;
  }
  REQUIRE_MESSAGE(ready, cohort::test::read_text(temp_file("prom.out")));
  // the job: trains about 10 s here alone, up to two minutes beside other tests (many scrapes
  // at 1 s while it runs; a small model, so that the two processes and Prometheus on 2 cores
  // stay inside the deadline: 30,000 steps took over 4 minutes on a loaded fresh machine),
  // then keeps serving long enough for the scrapes after its end
  const std::string out = temp_file("job.out"), err = temp_file("job.err");
  child job(std::string(MLP_BINARY) +
            " --data.name=synth --model.dims=784,32,10 --train.batch=128 --train.steps=15000 --train.threads=1 "
            "--plan.dp=2 --launch.nproc=2 --metrics.listen=127.0.0.1:" +
            std::to_string(job_port) + " --metrics.linger-s=8 >" + out + " 2>" + err);
  double running_step = std::nan("");
  while (std::isnan(running_step) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(250ms);
    running_step = prometheus_value(prom_port, "cohort_step");
  }
  REQUIRE_MESSAGE(!std::isnan(running_step), "Prometheus never got a sample; job: " << cohort::test::read_text(err));
  // wait for a scrape after the end (the job lingers 8 s)
  double finished = 0;
  while (finished != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(250ms);
    finished = prometheus_value(prom_port, "cohort_finished");
  }
  REQUIRE_MESSAGE(finished == 1, cohort::test::read_text(err));
  CHECK(prometheus_value(prom_port, "cohort_step") == 15000);
  CHECK(prometheus_value(prom_port, "cohort_steps_planned") == 15000);
  // a scrape while it trained: the least cohort_finished over the run's samples is 0
  CHECK(prometheus_value(prom_port, "min_over_time(cohort_finished%5B10m%5D)") == 0);
  CHECK(prometheus_value(prom_port, "cohort_live_processes") == 2);
  CHECK(prometheus_value(prom_port, "cohort_sent_bytes_total%7Bplane%3D%22data%22%7D") > 0);     // gradients
  CHECK(prometheus_value(prom_port, "cohort_sent_bytes_total%7Bplane%3D%22control%22%7D") > 0);  // losses, beats
  CHECK(prometheus_value(prom_port, "cohort_recoveries_total") == 0);
  CHECK(prometheus_value(prom_port, "cohort_step_seconds") > 0);
  const double loss = prometheus_value(prom_port, "cohort_loss");
  CHECK(job.wait() == 0);
  const std::string text = cohort::test::read_text(out);
  const auto last = text.find_last_of('\n', text.size() - 2);
  json summary = json::parse(text.substr(last == std::string::npos ? 0 : last + 1), nullptr, false);
  REQUIRE(!summary.is_discarded());
  CHECK(loss == doctest::Approx(summary["final_loss"].get<double>()).epsilon(1e-6));
  MESSAGE("Prometheus saw step " << running_step << " first, then 15000; loss " << loss);
  std::filesystem::remove_all(data);
}

TEST_CASE("after the coordinator's loss the process that took over serves --metrics.listen and writes --report.file" *
          doctest::test_suite("failure")) {
  // mlp dp4 over 4, process 0 (the coordinator, the endpoint, the page) SIGKILLed after step 10
  // of 30: process 1 takes over, serves the endpoint at the same address from then on and
  // lingers after the end; its report page holds all 30 steps (every process kept the record)
  const int port = free_port();
  const std::string out = temp_file("succession.out"), err = temp_file("succession.err");
  const std::string page = temp_file("succession.html");
  std::filesystem::remove(page);
  child job(std::string(MLP_BINARY) +
            " --data.name=digits --train.steps=30 --train.threads=1 --train.optimizer=adamw --train.lr=0.01 "
            "--fault.recover=true --plan.dp=4 --launch.nproc=4 --fault.signal=KILL --fault.signal-rank=0 "
            "--fault.signal-step=10 --metrics.linger-s=8 --metrics.listen=127.0.0.1:" +
            std::to_string(port) + " --report.file=" + page + " >" + out + " 2>" + err);
  // the last figures, from the process that took over (it lingers 8 s after the end)
  std::string figures;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (figures.find("\ncohort_finished{app=\"mlp\"} 1\n") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(250ms);
    auto [code, body] = get_if_up(port, "/metrics");
    if (code == 200) figures = body;
  }
  INFO(cohort::test::read_text(err));
  REQUIRE(figures.find("\ncohort_finished{app=\"mlp\"} 1\n") != std::string::npos);
  CHECK(figures.find("\ncohort_step{app=\"mlp\"} 30\n") != std::string::npos);
  CHECK(figures.find("\ncohort_recoveries_total{app=\"mlp\"} 1\n") != std::string::npos);
  CHECK(figures.find("\ncohort_live_processes{app=\"mlp\"} 3\n") != std::string::npos);
  CHECK(job.wait() == 0);
  const std::string log = cohort::test::read_text(err);
  CHECK(log.find("job: process 1 took over as the job's coordinator") != std::string::npos);
  // said twice: by process 0 at the start, by process 1 when it took over
  const std::string url = "metrics: http://127.0.0.1:" + std::to_string(port) + "/metrics";
  const auto first = log.find(url);
  REQUIRE(first != std::string::npos);
  CHECK(log.find(url, first + 1) != std::string::npos);
  const std::string html = cohort::test::read_text(page);
  CHECK(html.find("finished · 30 of 30 steps") != std::string::npos);
  std::size_t points = 0;
  for (auto at = html.find("data-points=\"30\""); at != std::string::npos; at = html.find("data-points=\"30\"", at + 1))
    ++points;
  CHECK(points == 2);  // the loss and the throughput: a point per step, the 10 before the loss too
  CHECK(html.find("recovery") != std::string::npos);
}
