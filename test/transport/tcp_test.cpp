// The TCP data plane across real OS processes on loopback: the shared data-plane scenarios
// (fabric_scenarios.hpp: bursts, landing buffers, collectives with 2 and 4 processes of one
// and two ranks, closing, misrouted and misaddressed frames) over TCP; a peer sending a
// malformed data frame closes the fabric with a reason, not a crash; the offered-buffer
// calls refuse what they cannot land; job secrets are read safely.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "fabric_scenarios.hpp"
#include "support/spawn_processes.hpp"
#include "transport/auth.hpp"
#include "transport/tcp_fabric.hpp"
#include "transport/wire.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace cohort::test;
using namespace std::chrono_literals;

TEST_CASE("a burst of frames of every size read in few reads over TCP: every message whole") {
  CHECK(job_succeeds(data_plane::tcp, 2, run_burst));
}

TEST_CASE("messages that come long after their receive began arrive whole over TCP (the kernel wait)") {
  CHECK(job_succeeds(data_plane::tcp, 2, run_late_messages));
}

TEST_CASE("recv_landing over TCP: the payload lands in the offered buffer, early and late messages stay whole") {
  CHECK(job_succeeds(data_plane::tcp, 2, run_landing));
}

TEST_CASE("ring collectives across 2 and 4 OS processes over TCP give the exact sums") {
  for (auto [processes, per_process] : {std::pair{2, 1}, std::pair{4, 1}, std::pair{2, 2}}) {
    CAPTURE(processes);
    CAPTURE(per_process);
    CHECK(job_succeeds(data_plane::tcp, processes, [&](data_plane d, job_ports& j, int p) {
      return run_collectives(d, j, p, processes, per_process);
    }));
  }
}

TEST_CASE("closing a TCP fabric wakes its waiting receive with the reason and fails later calls") {
  CHECK(job_succeeds(data_plane::tcp, 2, run_closing));
}

TEST_CASE("a TCP frame from or to a rank that does not live where it claims closes the fabric, naming it") {
  CHECK(job_succeeds(data_plane::tcp, 2, run_misrouted));
  CHECK(job_succeeds(data_plane::tcp, 2, run_misaddressed));
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
      auto hello = encode_frame({.generation = 1, .tag = ~std::uint64_t{0}, .source = 0, .destination = 1},
                                tensor::empty(shape{0}));
      auto bad = encode_frame({.generation = 1, .tag = 5, .source = 0, .destination = 1}, tensor::full({4}, 1.f));
      bad[0] = std::byte{0};  // bad magic
      if (auto st = s->send_all(hello.data(), hello.size(), 10s); !st) return st;
      if (auto st = s->send_all(bad.data(), bad.size(), 10s); !st) return st;
      // the connection stays open until process 1 is done with it (its fabric's end closes it)
      std::byte b;
      auto end = s->recv_exact(&b, 1, 20s);
      return expect(!end && end.error().code == errc::closed, "process 1 did not close the connection");
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

TEST_CASE("offer_landing refuses a rank of this process, a rank not here and a buffer it cannot land in") {
  auto listener = tcp_listener::open("127.0.0.1", 0);
  REQUIRE(listener);
  // a job of one process hosting both ranks: there is no remote rank to offer a buffer for
  tcp_fabric_options o;
  o.process_of_rank = {0, 0};
  o.peers = {{"127.0.0.1", listener->port()}};
  o.timeout = 5s;
  auto f = tcp_fabric::connect(*listener, o);
  REQUIRE(f);
  const tensor landing = tensor::zeros({4});
  auto local = (*f)->offer_landing(0, 1, 7, landing);
  REQUIRE_FALSE(local);
  CHECK(local.error().code == errc::invalid_argument);
  CHECK(local.error().message == "tcp_fabric: rank 1 is not a rank of another process");
  auto absent = (*f)->wait_landing(5, 1, 7, 1s);
  REQUIRE_FALSE(absent);
  CHECK(absent.error().message == "tcp_fabric: rank 5 is not in this process");
  auto strided = (*f)->offer_landing(0, 1, 7, tensor::zeros({4, 2}).transpose(0, 1));
  REQUIRE_FALSE(strided);
  CHECK(strided.error().code == errc::invalid_argument);
  CHECK_THROWS_AS((void)(*f)->endpoint(2), std::invalid_argument);
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

TEST_CASE("a listening socket handed over (the launcher's) is adopted with its port, anything else is refused") {
  auto l = cohort::transport::tcp_listener::open("127.0.0.1", 0);
  REQUIRE(l);
  const int copy = ::dup(l->fd());
  auto adopted = cohort::transport::tcp_listener::adopt(copy);
  REQUIRE(adopted);
  CHECK(adopted->port() == l->port());
  auto client = cohort::transport::tcp_socket::connect("127.0.0.1", l->port(), std::chrono::seconds(5));
  REQUIRE(client);
  CHECK(adopted->accept(std::chrono::seconds(5)).ok());  // the same listening socket
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  auto not_socket = cohort::transport::tcp_listener::adopt(pipe_fds[0]);
  REQUIRE_FALSE(not_socket);
  CHECK(not_socket.error().message ==
        "file descriptor " + std::to_string(pipe_fds[0]) + " is not a listening TCP socket");
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  CHECK_FALSE(cohort::transport::tcp_listener::adopt(-1));
}
