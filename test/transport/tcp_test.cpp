// The TCP data plane and the control plane across real OS processes on loopback: the ring
// collectives give exactly the in-process results with 2 and 4 processes (one and two ranks
// per process); a wrong job secret and a stale generation are refused while the right node
// joins; a node killed with SIGKILL, or stopped with SIGSTOP, is reported as lost, naming it;
// a peer sending a malformed data frame closes the fabric with a reason, not a crash; a
// payload lands in the buffer its receiver offered (recv_landing), early and late ones intact.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "support/spawn_processes.hpp"
#include "transport/auth.hpp"
#include "transport/collectives.hpp"
#include "transport/control_plane.hpp"
#include "transport/tcp_fabric.hpp"
#include "transport/wire.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace std::chrono_literals;
using cohort::test::spawn_processes;

namespace {

float value(int r, std::int64_t j) { return static_cast<float>((r + 1) * (j % 13 + 1)); }

status expect(bool ok, const std::string& what) {
  return ok ? status{} : status(make_error(errc::invalid_argument, what));
}

// The listeners every process of a job needs, opened before forking.
struct job_ports {
  tcp_listener control;
  std::vector<tcp_listener> data;
  explicit job_ports(int processes) {
    control = tcp_listener::open("127.0.0.1", 0).value();
    for (int p = 0; p < processes; ++p) data.push_back(tcp_listener::open("127.0.0.1", 0).value());
  }
};

result<std::unique_ptr<control_plane>> join_job(job_ports& ports, int process, int world, control_options o = {}) {
  o.world = world;
  o.process = process;
  o.master_port = ports.control.port();
  o.join_timeout = 20s;
  const int data_port = ports.data[static_cast<std::size_t>(process)].port();
  if (process == 0) return control_plane::coordinate(o, std::move(ports.control), data_port);
  return control_plane::join(o, data_port);
}

// One process of a job with `per_process` ranks each: every collective, checked exactly.
status run_collectives(job_ports& ports, int process, int processes, int per_process) {
  auto cp = join_job(ports, process, processes);
  if (!cp) return cp.error();
  const int ranks = processes * per_process;
  tcp_fabric_options fo;
  for (int r = 0; r < ranks; ++r) fo.process_of_rank.push_back(r / per_process);
  fo.process = process;
  for (const auto& n : (*cp)->roster()) fo.peers.push_back({n.host, n.data_port});
  fo.timeout = 20s;
  auto fabric = tcp_fabric::connect(ports.data[static_cast<std::size_t>(process)], fo);
  if (!fabric) return fabric.error();
  std::vector<int> group;
  for (int r = 0; r < ranks; ++r) group.push_back(r);
  std::vector<std::thread> threads;
  std::vector<status> results(static_cast<std::size_t>(per_process));
  for (int k = 0; k < per_process; ++k) {
    threads.emplace_back([&, k] {
      const int me = process * per_process + k;
      channel& ch = (*fabric)->endpoint(me);
      // a buffer up to the socket's send buffer (at most 1 MiB) goes whole before the peer's is
      // read (recursive doubling); within a process, one chunk ahead
      const int remote = ((process + 1) % processes) * per_process, local = process * per_process + (k + 1) % per_process;
      if (ch.send_ahead_bytes(remote) <= 0 || ch.send_ahead_bytes(remote) > (1 << 20) || ch.send_ahead_bytes(local) != 0 ||
          ch.send_ahead_bytes(ranks) != 0) {
        results[static_cast<std::size_t>(k)] = expect(false, "send_ahead_bytes: " + std::to_string(ch.send_ahead_bytes(remote)) +
                                                                 " to a remote rank, " + std::to_string(ch.send_ahead_bytes(local)) +
                                                                 " to a local one, " + std::to_string(ch.send_ahead_bytes(ranks)) +
                                                                 " to a nonexistent one");
        return;
      }
      // 50003 floats (200 KB: within even a default 208 KiB send buffer): several chunks, sent
      // whole first by allreduce()'s recursive doubling on 2 processes; (1 << 20) + 3: chunk by chunk
      for (std::int64_t n : {std::int64_t{1}, std::int64_t{1001}, std::int64_t{50003}, std::int64_t{(1 << 20) + 3}})
        for (bool ring : {true, false}) {  // the ring, and allreduce()'s pick (recursive doubling on pairs)
          tensor buf = tensor::empty({n});
          for (std::int64_t j = 0; j < n; ++j) buf.data<float>()[j] = value(me, j);
          auto st = ring ? allreduce_ring(ch, group, buf, {.tag = 1, .timeout = 20s}) : allreduce(ch, group, buf, {.tag = 3, .timeout = 20s});
          if (!st) {
            results[static_cast<std::size_t>(k)] = st;
            return;
          }
          for (std::int64_t j = 0; j < n; ++j)
            if (buf.data<float>()[j] != static_cast<float>(ranks * (ranks + 1) / 2 * (j % 13 + 1))) {
              results[static_cast<std::size_t>(k)] = expect(false, std::string(ring ? "ring" : "allreduce()") + " wrong at " + std::to_string(j));
              return;
            }
        }
      tensor b = tensor::full({7}, me == 1 ? 3.5f : 0.f);
      if (auto st = broadcast(ch, group, 1, b, {.tag = 2, .timeout = 20s}); !st) {
        results[static_cast<std::size_t>(k)] = st;
        return;
      }
      results[static_cast<std::size_t>(k)] = expect(b.data<float>()[6] == 3.5f, "broadcast value");
    });
  }
  for (auto& t : threads) t.join();
  for (auto& st : results)
    if (!st) return st;
  auto total = (*cp)->sum(7, {static_cast<double>(process) + 0.25});
  if (!total) return total.error();
  if (auto st = expect((*total)[0] == processes * (processes - 1) / 2.0 + 0.25 * processes, "control sum"); !st) return st;
  return (*cp)->finish(10s);
}

// A job of two processes, one rank each, joined over the control plane and the TCP fabric.
struct pair_job {
  std::unique_ptr<control_plane> control;
  std::shared_ptr<tcp_fabric> fabric;
};

result<pair_job> join_pair(job_ports& ports, int process) {
  auto cp = join_job(ports, process, 2);
  if (!cp) return cp.error();
  tcp_fabric_options fo;
  fo.process_of_rank = {0, 1};
  fo.process = process;
  fo.timeout = 20s;
  for (const auto& n : (*cp)->roster()) fo.peers.push_back({n.host, n.data_port});
  auto fabric = tcp_fabric::connect(ports.data[static_cast<std::size_t>(process)], fo);
  if (!fabric) return fabric.error();
  return pair_job{std::move(*cp), std::move(*fabric)};
}

// Process 0 sends, process 1 receives with recv_landing(): the payload lands in the offered
// buffer when it was offered first; a message that came before is returned as it is; a wait
// that times out leaves the buffer alone, and the message it missed is received whole later.
status run_landing(job_ports& ports, int process) {
  auto job = join_pair(ports, process);
  if (!job) return job.error();
  auto& [cp, fabric] = *job;
  channel& ch = fabric->endpoint(process);
  const std::int64_t n = 100000;
  auto message = [&](float base) {
    tensor t = tensor::empty({n});
    for (std::int64_t j = 0; j < n; ++j) t.data<float>()[j] = base + static_cast<float>(j);
    return t;
  };
  auto is_message = [&](const tensor& t, float base) {
    if (t.numel() != n) return false;
    for (std::int64_t j = 0; j < n; ++j)
      if (t.data<float>()[j] != base + static_cast<float>(j)) return false;
    return true;
  };
  if (process == 0) {
    // 1: offered first (process 1 says it is about to wait; up to 5 tries for it to be waiting)
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto ready = ch.recv(1, 100 + static_cast<std::uint64_t>(attempt), 20s);
      if (!ready) return ready.error();
      if (ready->at(0) == 0.f) break;  // it has seen a landing
      std::this_thread::sleep_for(100ms);
      if (auto st = ch.send(1, 10 + static_cast<std::uint64_t>(attempt), message(1.f), 20s); !st) return st;
    }
    // 2: a message that arrives before the receiver asks for it
    if (auto st = ch.send(1, 20, message(2.f), 20s); !st) return st;
    if (auto st = ch.send(1, 21, tensor::zeros({1}), 20s); !st) return st;
    // 3: sent only after the receiver's wait for it timed out
    auto timed_out = ch.recv(1, 30, 20s);
    if (!timed_out) return timed_out.error();
    if (auto st = ch.send(1, 31, message(3.f), 20s); !st) return st;
  } else {
    bool landed = false;
    for (int attempt = 0; attempt < 5 && !landed; ++attempt) {
      if (auto st = ch.send(0, 100 + static_cast<std::uint64_t>(attempt), tensor::full({1}, 1.f), 20s); !st) return st;
      tensor landing = tensor::full({n}, -1.f);
      auto got = ch.recv_landing(0, 10 + static_cast<std::uint64_t>(attempt), landing, 20s);
      if (!got) return got.error();
      if (!is_message(*got, 1.f)) return expect(false, "the message offered a landing is wrong");
      landed = got->data<float>() == landing.data<float>();
      if (landed && !is_message(landing, 1.f)) return expect(false, "the landing buffer is wrong");
      if (landed)
        if (auto st = ch.send(0, 101 + static_cast<std::uint64_t>(attempt), tensor::zeros({1}), 20s); !st) return st;
    }
    if (!landed) return expect(false, "no payload landed in the offered buffer in 5 tries");
    if (auto st = ch.recv(0, 21, 20s); !st) return st.error();  // message 20 is already here
    tensor unused = tensor::full({n}, -1.f);
    auto early = ch.recv_landing(0, 20, unused, 20s);
    if (!early || !is_message(*early, 2.f)) return expect(false, "a message that came first is wrong");
    tensor untouched = tensor::full({n}, -1.f);
    auto late = ch.recv_landing(0, 31, untouched, 50ms);
    if (late || late.error().code != errc::timeout) return expect(false, "the wait for message 31 did not time out");
    if (auto st = ch.send(0, 30, tensor::zeros({1}), 20s); !st) return st;
    auto whole = ch.recv(0, 31, 20s);
    if (!whole || !is_message(*whole, 3.f)) return expect(false, "the message after a timed-out wait is wrong");
    for (std::int64_t j = 0; j < n; ++j)
      if (untouched.data<float>()[j] != -1.f) return expect(false, "a timed-out landing buffer was written");
  }
  return cp->finish(10s);
}

// Process 0 sends a burst of frames without waiting; process 1 reads them only once they
// are all queued, so that one read takes several frames, or ends inside a header, a shape or a
// payload: scalars, empty tensors, shapes of rank 0 to 3, payloads on either side of the
// reader's 4 KiB look-ahead, a large one between small ones. Every message arrives whole.
status run_burst(job_ports& ports, int process) {
  auto job = join_pair(ports, process);
  if (!job) return job.error();
  auto& [cp, fabric] = *job;
  channel& ch = fabric->endpoint(process);
  std::vector<shape> shapes = {shape{}, shape{0}, shape{1}, shape{3, 0, 2}, shape{2, 3, 5}, shape{100000}, shape{1}};
  for (std::int64_t n = 1000; n <= 1030; n += 3) shapes.push_back(shape{n});  // 4,000 - 4,120 bytes: frames either side of the look-ahead (4,160)
  for (std::int64_t n = 1; n <= 64; n *= 2) shapes.push_back(shape{n, 3});
  auto fill = [](const shape& s, std::uint64_t tag) {
    tensor t = tensor::empty(s);
    for (std::int64_t j = 0; j < t.numel(); ++j) t.data<float>()[j] = static_cast<float>(tag * 1000003 + static_cast<std::uint64_t>(j));
    return t;
  };
  if (process == 0) {
    for (std::size_t i = 0; i < shapes.size(); ++i)
      if (auto st = ch.send(1, i, fill(shapes[i], i), 20s); !st) return st;
    if (auto done = ch.recv(1, 9999, 20s); !done) return done.error();
  } else {
    std::this_thread::sleep_for(300ms);  // the whole burst is queued in the socket by now
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      tensor landing = tensor::full({shapes[i].numel()}, -1.f);
      auto got = i % 2 == 0 ? ch.recv(0, i, 20s) : ch.recv_landing(0, i, landing, 20s);
      if (!got) return got.error();
      const tensor want = fill(shapes[i], i);
      bool same = got->shape() == shapes[i];
      for (std::int64_t j = 0; same && j < want.numel(); ++j) same = got->data<float>()[j] == want.data<float>()[j];
      if (!same) return expect(false, "message " + std::to_string(i) + " of shape " + shapes[i].to_string() + " arrived wrong");
    }
    if (auto st = ch.send(0, 9999, tensor::zeros({1}), 20s); !st) return st;
  }
  return cp->finish(10s);
}

}  // namespace

TEST_CASE("a burst of frames of every size read in few reads over TCP: every message whole") {
  job_ports ports(2);
  auto codes = spawn_processes(2, [&](int p) { return run_burst(ports, p); });
  for (int c : codes) CHECK(c == 0);
}

TEST_CASE("recv_landing over TCP: the payload lands in the offered buffer, early and late messages stay whole") {
  job_ports ports(2);
  auto codes = spawn_processes(2, [&](int p) { return run_landing(ports, p); });
  for (int c : codes) CHECK(c == 0);
}

TEST_CASE("ring collectives across 2 and 4 OS processes over TCP give the exact sums") {
  for (auto [processes, per_process] : {std::pair{2, 1}, std::pair{4, 1}, std::pair{2, 2}}) {
    CAPTURE(processes);
    CAPTURE(per_process);
    job_ports ports(processes);
    auto codes = spawn_processes(processes, [&](int p) { return run_collectives(ports, p, processes, per_process); });
    for (int c : codes) CHECK(c == 0);
  }
}

TEST_CASE("a wrong job secret or a stale generation is refused, the right node then joins") {
  job_ports ports(2);
  const int port = ports.control.port();
  std::thread coordinator_thread;
  result<std::unique_ptr<control_plane>> coord = make_error(errc::closed, "not run");
  control_options o;
  o.world = 2;
  o.master_port = port;
  o.secret = "right secret";
  o.join_timeout = 20s;
  coordinator_thread = std::thread([&] { coord = control_plane::coordinate(o, std::move(ports.control), ports.data[0].port()); });

  control_options wrong = o;
  wrong.process = 1;
  wrong.secret = "wrong secret";
  auto bad = control_plane::join(wrong, ports.data[1].port());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("authentication failed") != std::string::npos);

  control_options stale = o;
  stale.process = 1;
  stale.generation = 0;
  auto old = control_plane::join(stale, ports.data[1].port());
  REQUIRE_FALSE(old);
  CHECK(old.error().message.find("refused") != std::string::npos);

  control_options good = o;
  good.process = 1;
  auto node = control_plane::join(good, ports.data[1].port());
  coordinator_thread.join();
  REQUIRE(node);
  REQUIRE(coord);
  CHECK((*node)->process() == 1);
  CHECK((*coord)->roster()[1].data_port == ports.data[1].port());
  CHECK((*coord)->finish(5s).ok());
  CHECK((*node)->finish(5s).ok());
}

TEST_CASE("job secrets: a file others can read is refused, the environment variables are read") {
  char path[] = "/tmp/cohort-secret-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "abc\n", 4) == 4);
  ::close(fd);
  ::chmod(path, 0644);
  auto loose = read_secret_file(path);
  REQUIRE_FALSE(loose);
  CHECK(loose.error().message.find("mode 0644") != std::string::npos);
  ::chmod(path, 0600);
  auto tight = read_secret_file(path);
  REQUIRE(tight);
  CHECK(*tight == "abc");
  ::setenv("COHORT_JOB_SECRET_FILE", path, 1);
  auto env = load_job_secret();
  ::unsetenv("COHORT_JOB_SECRET_FILE");
  ::unlink(path);
  REQUIRE(env);
  CHECK(*env == "abc");
}

namespace {

// The coordinator's view of a node that joins and then meets `fate` (a signal it raises).
lost_node lose_a_node(int signal_number) {
  job_ports ports(2);
  control_options o;
  o.heartbeat = 100ms;
  o.heartbeat_timeout = 800ms;
  pid_t child = ::fork();
  if (child == 0) {
    auto cp = join_job(ports, 1, 2, o);
    if (!cp) ::_exit(3);
    (*cp)->set_step(4);
    std::this_thread::sleep_for(200ms);
    ::raise(signal_number);
    std::this_thread::sleep_for(60s);
    ::_exit(0);
  }
  auto cp = join_job(ports, 0, 2, o);
  REQUIRE(cp);
  (*cp)->set_step(4);
  auto lost = (*cp)->wait_lost(10s);
  ::kill(child, SIGKILL);
  int ws = 0;
  ::waitpid(child, &ws, 0);
  REQUIRE(lost);
  return *lost;
}

}  // namespace

TEST_CASE("a node killed with SIGKILL is reported at once, naming it, the step and the reason") {
  lost_node n = lose_a_node(SIGKILL);
  CHECK(n.process == 1);
  CHECK(n.step == 4);
  CHECK(n.reason.find("connection closed without a goodbye") != std::string::npos);
  CHECK(n.describe().find("lost node 1 (pid ") == 0);
}

TEST_CASE("a node stopped with SIGSTOP is reported when its heartbeats stop") {
  lost_node n = lose_a_node(SIGSTOP);
  CHECK(n.process == 1);
  CHECK(n.reason.find("no heartbeat for 800 ms") != std::string::npos);
}

TEST_CASE("a malformed data frame from a peer closes the fabric with a reason") {
  job_ports ports(2);
  auto codes = spawn_processes(2, [&](int p) -> status {
    tcp_fabric_options fo;
    fo.process_of_rank = {0, 1};
    fo.process = p;
    for (auto& l : ports.data) fo.peers.push_back({"127.0.0.1", l.port()});
    fo.timeout = 10s;
    if (p == 0) {  // not a fabric: connect by hand, handshake, hello, then garbage
      auto s = tcp_socket::connect("127.0.0.1", ports.data[1].port(), 10s);
      if (!s) return s.error();
      if (auto st = authenticate_client(*s, "", 10s); !st) return st;
      auto hello = encode_frame({.generation = 1, .tag = ~std::uint64_t{0}, .source = 0, .destination = 1}, tensor::empty(shape{0}));
      auto bad = encode_frame({.generation = 1, .tag = 5, .source = 0, .destination = 1}, tensor::full({4}, 1.f));
      bad[0] = std::byte{0};  // bad magic
      if (auto st = s->send_all(hello.data(), hello.size(), 10s); !st) return st;
      if (auto st = s->send_all(bad.data(), bad.size(), 10s); !st) return st;
      std::this_thread::sleep_for(2s);
      return {};
    }
    // process 1 accepts process 0 (lower processes connect to higher ones)
    auto f = tcp_fabric::connect(ports.data[1], fo);
    if (!f) return f.error();
    auto r = (*f)->endpoint(1).recv(0, 5, 10s);
    if (r) return make_error(errc::invalid_argument, "a bad frame was delivered");
    if (r.error().code != errc::closed || r.error().message.find("bad magic") == std::string::npos)
      return make_error(errc::invalid_argument, "unexpected error: " + r.error().message);
    return {};
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
}
