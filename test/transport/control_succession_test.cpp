// The control plane's succession (control_options::succession), its processes forked from this
// one: a node takes over a SIGKILLed coordinator once a strict majority of the last membership
// reaches it, and the job's collectives, data plane and goodbyes go on through it; a second
// succession while 3 processes remain; a replacement admitted at the successor's standby port;
// no successor without a majority; a coordinator cut off from most of its processes ends rather
// than lead a minority.
#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "process_job.hpp"
#include "support/run_files.hpp"
#include "transport/control_codec.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace cohort::test;
using namespace std::chrono_literals;

namespace {

using plane_result = result<std::unique_ptr<control_plane>>;

control_options succession_options() {
  control_options o;
  o.keep_going = true;
  o.succession = true;
  o.heartbeat = 100ms;
  o.heartbeat_timeout = 800ms;
  o.succession_timeout = 3s;
  return o;
}

}  // namespace

TEST_CASE("with succession a node takes over a SIGKILLed coordinator and the job goes on among the others" *
          doctest::test_suite("failure")) {
  // process 0 dies after the first sum; 1 takes over (2 and 3 follow it: 3 of 4, a majority),
  // and the others' collectives, data plane and goodbyes run through it
  auto codes = run_job(4, [](job_ports& ports, int p) -> status {
    auto cp = join_job(ports, p, 4, succession_options());
    if (!cp) return cp.error();
    control_plane& c = **cp;
    std::atomic<int> heard{0};
    c.on_lost([&](const lost_node&) { ++heard; });
    c.set_step(5);
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    if (p == 0) ::raise(SIGKILL);
    auto m = c.wait_membership(0, 10s);
    if (!m) return m.error();
    const std::string who = "process " + std::to_string(p) + ": ";
    if (m->epoch != 1 || m->live != std::vector<bool>{false, true, true, true} || m->lost != std::vector<int>{0})
      return expect(false, who + "the wrong membership " + transport::control::membership_text(*m));
    if (c.leader() != 1 || c.is_leader() != (p == 1)) return expect(false, who + "the wrong coordinator");
    if (heard != 1) return expect(false, who + "on_lost ran " + std::to_string(heard.load()) + " times");
    auto loss = c.last_loss();
    if (!loss || loss->describe().find("lost the coordinator (process 0, pid ") == std::string::npos)
      return expect(false, who + "the loss report: " + (loss ? loss->describe() : std::string("none")));
    auto total = c.sum(1, {static_cast<double>(p)});  // the same key again: the epoch tells them apart
    if (!total || (*total)[0] != 6.0) return expect(false, who + "the sum among the survivors");
    auto lines = c.all_gather_text(2, "p" + std::to_string(p));
    if (!lines || *lines != std::vector<std::string>{"", "p1", "p2", "p3"})
      return expect(false, who + "all_gather_text");
    auto text = c.broadcast_text(3, p == 1 ? "from the new coordinator" : "");
    if (!text || *text != "from the new coordinator") return expect(false, who + "broadcast_text");
    auto f = connect_data(data_plane::tcp, ports, c, {1, 2, 3});  // a data plane without process 0
    if (!f) return f.error();
    auto& ch = (*f)->endpoint(p - 1);
    if (p == 1) {
      for (int to : {1, 2})
        if (auto st = ch.send(to, 9, tensor::full({3}, 7.f), 10s); !st) return st;
    } else {
      auto got = ch.recv(0, 9, 10s);
      if (!got || got->numel() != 3 || got->data<float>()[2] != 7.f) return expect(false, who + "the data plane");
    }
    if (c.lost()) return expect(false, who + "the job ended");
    return c.finish(10s);
  });
  CHECK(codes[0] == -SIGKILL);
  CHECK(codes[1] == 0);
  CHECK(codes[2] == 0);
  CHECK(codes[3] == 0);
}

TEST_CASE("with succession the next coordinator's loss is survived too, while 3 processes remain" *
          doctest::test_suite("failure")) {
  // 5 processes: 0 dies, 1 takes over; then 1 dies, 2 takes over (3 of the 4 left: a majority)
  auto codes = run_job(5, [](job_ports& ports, int p) -> status {
    auto cp = join_job(ports, p, 5, succession_options());
    if (!cp) return cp.error();
    control_plane& c = **cp;
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    if (p == 0) ::raise(SIGKILL);
    auto m = c.wait_membership(0, 10s);
    if (!m) return m.error();
    if (auto go = c.sum(1, {1.0}); !go || (*go)[0] != 4.0) return expect(false, "the sum after the first takeover");
    if (p == 1) ::raise(SIGKILL);
    m = c.wait_membership(m->epoch, 10s);
    if (!m) return m.error();
    if (m->live != std::vector<bool>{false, false, true, true, true} || m->lost != std::vector<int>{0, 1} ||
        c.leader() != 2)
      return expect(false, "process " + std::to_string(p) + ": the wrong membership after the second takeover");
    auto total = c.sum(1, {static_cast<double>(p)});
    if (!total || (*total)[0] != 9.0) return expect(false, "the sum after the second takeover");
    return c.finish(10s);
  });
  CHECK(codes[0] == -SIGKILL);
  CHECK(codes[1] == -SIGKILL);
  CHECK(codes[2] == 0);
  CHECK(codes[3] == 0);
  CHECK(codes[4] == 0);
}

TEST_CASE("after a succession a replacement joins the new coordinator at its standby port in a lost node's place" *
          doctest::test_suite("failure")) {
  // processes 0-3 form the job (succession, replacements admitted); 0 dies after the first sum
  // and 1 takes over, then 3 dies after the second; the 5th forked process reads where process 1
  // admits processes (its roster entry's standby port, written to a file) and takes 3's place
  const std::string where = temp_path("ctl", "leader-at");
  std::filesystem::remove(where);
  auto codes = run_job(5, [&](job_ports& ports, int p) -> status {
    control_options o = succession_options();
    o.admit_replacements = true;
    if (p == 4) {
      int port = 0;
      for (int i = 0; i < 400 && port == 0; ++i) {  // 20 s at most
        std::ifstream(where) >> port;
        if (port == 0) std::this_thread::sleep_for(50ms);
      }
      if (port == 0) return expect(false, "process 1 never said where it admits processes");
      o.world = 4;
      o.process = -1;
      o.master_port = port;
      o.join_timeout = 20s;
      o.replacement = true;
      plane_result cp = make_error(errc::closed, "not joined");
      for (int attempt = 0; attempt < 400; ++attempt) {  // until process 3 is lost
        cp = control_plane::join(o, ports.data[4].port());
        if (cp || cp.error().message.find("no lost process to replace") == std::string::npos) break;
        std::this_thread::sleep_for(50ms);
      }
      if (!cp) return cp.error();
      control_plane& c = **cp;
      if (c.process() != 3) return expect(false, "the replacement is process " + std::to_string(c.process()));
      if (c.leader() != 1) return expect(false, "the replacement's coordinator is " + std::to_string(c.leader()));
      const auto m = c.members();
      if (m.live != std::vector<bool>{false, true, true, true} || m.replaced != std::vector<int>{3})
        return expect(false, "the replacement's membership " + transport::control::membership_text(m));
      auto total = c.sum(7, {3.0});
      if (!total || (*total)[0] != 6.0) return expect(false, "the replacement's sum");
      auto lines = c.all_gather_text(8, "p3");
      if (!lines || *lines != std::vector<std::string>{"", "p1", "p2", "p3"}) return expect(false, "all_gather_text");
      return c.finish(10s);
    }
    auto cp = join_job(ports, p, 4, o);
    if (!cp) return cp.error();
    control_plane& c = **cp;
    c.set_step(5);
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    if (p == 0) ::raise(SIGKILL);
    auto m = c.wait_membership(0, 10s);
    if (!m || m->live != std::vector<bool>{false, true, true, true} || m->leader != 1)
      return expect(false, "process " + std::to_string(p) + ": the membership after the succession");
    if (p == 1) std::ofstream(where) << c.roster()[1].standby_port << "\n";
    if (auto go = c.sum(2, {1.0}); !go) return go.error();
    if (p == 3) ::raise(SIGKILL);
    auto lost = c.wait_membership(m->epoch, 10s);
    if (!lost || lost->live != std::vector<bool>{false, true, true, false})
      return expect(false, "process " + std::to_string(p) + ": the membership after losing process 3");
    auto replaced = c.wait_membership(lost->epoch, 20s);
    if (!replaced) return replaced.error();
    if (replaced->live != std::vector<bool>{false, true, true, true} || replaced->replaced != std::vector<int>{3})
      return expect(false, "process " + std::to_string(p) + ": the membership after the replacement " +
                               transport::control::membership_text(*replaced));
    auto total = c.sum(7, {static_cast<double>(p)});
    if (!total || (*total)[0] != 6.0) return expect(false, "the sum with the replacement");
    auto lines = c.all_gather_text(8, "p" + std::to_string(p));
    if (!lines || *lines != std::vector<std::string>{"", "p1", "p2", "p3"}) return expect(false, "all_gather_text");
    return c.finish(10s);
  });
  CHECK(codes[0] == -SIGKILL);
  CHECK(codes[1] == 0);
  CHECK(codes[2] == 0);
  CHECK(codes[3] == -SIGKILL);
  CHECK(codes[4] == 0);
}

TEST_CASE("with succession a node that cannot reach a majority ends the job instead of leading it" *
          doctest::test_suite("failure")) {
  // 3 processes: 0 and 2 die together; 1 alone is 1 of 3 (or, where it heard of 2's loss
  // first, 1 of 2): no majority either way, and it says so
  auto codes = run_job(3, [](job_ports& ports, int p) -> status {
    auto cp = join_job(ports, p, 3, succession_options());
    if (!cp) return cp.error();
    control_plane& c = **cp;
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    if (p != 1) ::raise(SIGKILL);
    auto lost = c.wait_lost(10s);
    if (!lost) return expect(false, "process 1 went on alone");
    if (lost->describe().find("majority") == std::string::npos || c.leader() != 0)
      return expect(false, "the report: " + lost->describe());
    auto after = c.sum(2, {1.0});
    return expect(!after && after.error().code == errc::closed, "a collective after the end did not fail");
  });
  CHECK(codes[0] == -SIGKILL);
  CHECK(codes[1] == 0);
  CHECK(codes[2] == -SIGKILL);
}

TEST_CASE("with succession a coordinator cut off from most of its processes at once ends rather than lead a minority" *
          doctest::test_suite("failure")) {
  // 3 processes: 1 and 2 stop at once (SIGSTOP: to the coordinator, silence, as a partition
  // looks); after the first loss 2 of 3 remain, after the second 1: the coordinator ends
  auto codes = run_job(3, [](job_ports& ports, int p) -> status {
    auto cp = join_job(ports, p, 3, succession_options());
    if (!cp) return cp.error();
    control_plane& c = **cp;
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    if (p != 0) ::raise(SIGSTOP);  // stopped until the coordinator kills it
    auto lost = c.wait_lost(10s);
    const auto roster = c.roster();
    for (int q : {1, 2}) ::kill(static_cast<pid_t>(roster[static_cast<std::size_t>(q)].pid), SIGKILL);
    if (!lost) return expect(false, "the coordinator went on with 1 of 3 processes");
    return expect(lost->describe().find("lost touch with more than half of its processes at once") != std::string::npos,
                  "the report: " + lost->describe());
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == -SIGKILL);
  CHECK(codes[2] == -SIGKILL);
}
