// The control plane on loopback, its processes as threads of this one (the rendezvous, the
// collectives) or as OS processes (losses): a wrong job secret, a stale generation, another
// world size, a bad data port or core count, a frame that is no hello, and a second claim on
// a process number are refused with the reason while the right nodes join; nodes asking for
// any number get distinct ones; the small collectives give every process the exact results;
// a node killed (SIGKILL) or stopped (SIGSTOP) is reported lost, naming it, the step and the
// reason, and the coordinator relays the loss to the other nodes.
// (Succession, a node taking over a lost coordinator: control_succession_test.cpp.)
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "control_plane_support.hpp"
#include "process_job.hpp"
#include "support/run_files.hpp"
#include "support/spawn_processes.hpp"
#include "support/spawn_ranks.hpp"
#include "transport/auth.hpp"
#include "transport/control_codec.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace cohort::test;
using namespace std::chrono_literals;

using plane_result = cohort::test::plane_result;
using cohort::test::coordinator;
using cohort::test::finish_all;
using cohort::test::job_options;
using cohort::test::join_as;
using cohort::test::refusal;

TEST_CASE("a wrong job secret or a stale generation is refused, the right node then joins") {
  job_ports ports(2);
  control_options o = job_options(ports, 2);
  o.secret = "right secret";
  coordinator c(ports, o);

  control_options wrong = o;
  wrong.secret = "wrong secret";
  auto bad = join_as(wrong, 1, ports.data[1].port());
  CHECK(refusal(bad).find("authentication failed") != std::string::npos);

  control_options stale = o;
  stale.generation = 0;
  auto old = join_as(stale, 1, ports.data[1].port());
  CHECK(refusal(old).find("refused") != std::string::npos);

  auto node = join_as(o, 1, ports.data[1].port());
  control_plane& coord = c.get();
  REQUIRE(node);
  CHECK((*node)->process() == 1);
  CHECK(coord.roster()[1].data_port == ports.data[1].port());
  finish_all({&coord, node->get()});
}

TEST_CASE("a node of another world size, a bad data port or core count, or no hello is refused with the reason") {
  job_ports ports(2);
  const control_options o = job_options(ports, 2);
  coordinator c(ports, o);
  const std::string refused = "control: the coordinator refused this node: ";

  control_options bigger = o;
  bigger.world = 3;
  CHECK(refusal(join_as(bigger, 1, ports.data[1].port())) == refused + "the node expects 3 processes; this job has 2");
  CHECK(refusal(join_as(o, 1, 0)) == refused + "bad data port 0, core count 1 or standby port 0");
  control_options coreless = o;
  coreless.cores = 0;
  CHECK(refusal(join_as(coreless, 1, ports.data[1].port())) ==
        refused + "bad data port " + std::to_string(ports.data[1].port()) + ", core count 0 or standby port 0");

  // a client that authenticates and then sends text instead of its hello
  auto s = tcp_socket::connect("127.0.0.1", o.master_port, 5s);
  REQUIRE(s);
  REQUIRE(authenticate_client(*s, "", 5s).ok());
  REQUIRE(
      control::write_message(*s, o.generation, control::tag_of(control::kind::text), 0, control::pack_text("hi"), 5s)
          .ok());
  auto answer = control::read_message(*s, o.generation, control::small_payload, 5s);
  REQUIRE(answer);
  CHECK(control::is(answer->tag, control::kind::refuse));
  CHECK(control::text_of(answer->body).value() == "expected a hello");

  auto node = join_as(o, 1, ports.data[1].port());
  control_plane& coord = c.get();
  REQUIRE(node);
  finish_all({&coord, node->get()});
}

TEST_CASE("two nodes claiming the same process number: one joins, the other is refused") {
  job_ports ports(3);
  const control_options o = job_options(ports, 3);
  coordinator c(ports, o);
  plane_result a = make_error(errc::closed, "not run"), b = make_error(errc::closed, "not run");
  finished done;
  std::thread ta([&] {
    a = join_as(o, 1, ports.data[1].port());
    done.one();
  });
  std::thread tb([&] {
    b = join_as(o, 1, ports.data[2].port());
    done.one();
  });
  // the refused one returns first (the other waits for the roster, which needs process 2)
  REQUIRE(done.wait_for(1, 20s));
  auto third = join_as(o, 2, ports.data[0].port());
  ta.join();
  tb.join();
  control_plane& coord = c.get();
  REQUIRE(third);
  REQUIRE(a.ok() != b.ok());
  auto& winner = a.ok() ? a : b;
  CHECK(refusal(a.ok() ? b : a) == "control: the coordinator refused this node: rank 1 is not free in a job of 3");
  CHECK((*winner)->process() == 1);
  CHECK(coord.roster()[1].data_port == ports.data[a.ok() ? 1 : 2].port());
  finish_all({&coord, winner->get(), third->get()});
}

TEST_CASE("nodes that ask for any number are numbered in join order, each once") {
  job_ports ports(3);
  const control_options o = job_options(ports, 3);
  coordinator c(ports, o);
  plane_result a = make_error(errc::closed, "not run"), b = make_error(errc::closed, "not run");
  std::thread ta([&] { a = join_as(o, -1, ports.data[1].port()); });
  std::thread tb([&] { b = join_as(o, -1, ports.data[2].port()); });
  ta.join();
  tb.join();
  control_plane& coord = c.get();
  REQUIRE(a);
  REQUIRE(b);
  CHECK((*a)->process() + (*b)->process() == 3);  // 1 and 2, in either order
  CHECK((*a)->process() != (*b)->process());
  CHECK(coord.roster()[static_cast<std::size_t>((*a)->process())].data_port == ports.data[1].port());
  CHECK((*a)->roster()[static_cast<std::size_t>((*b)->process())].data_port == ports.data[2].port());
  finish_all({&coord, a->get(), b->get()});
}

TEST_CASE("the small collectives give every process the exact results") {
  job_ports ports(3);
  const control_options o = job_options(ports, 3);
  const std::vector<int> owner = {0, 1, 2, 1};  // gathered piece i comes from process owner[i]
  auto results = spawn_ranks(3, [&](int p) -> status {
    auto cp = join_job(ports, p, 3, o);
    if (!cp) return cp.error();
    control_plane& c = **cp;
    auto text = c.broadcast_text(1, p == 0 ? "the plan" : "");
    if (!text || *text != "the plan") return expect(false, "broadcast_text: " + (text ? *text : text.error().message));
    auto lines = c.all_gather_text(2, "process " + std::to_string(p));
    if (!lines || *lines != std::vector<std::string>{"process 0", "process 1", "process 2"})
      return expect(false, "all_gather_text");
    auto total = c.sum(4, {static_cast<double>(p), 0.5, -1e-3 * p});
    if (!total || *total != std::vector<double>{3.0, 1.5, (-1e-3 * 0 + -1e-3 * 1) + -1e-3 * 2})
      return expect(false, "sum");
    std::vector<std::pair<int, tensor>> mine;
    for (int i = 0; i < 4; ++i)
      if (owner[static_cast<std::size_t>(i)] == p)
        mine.push_back({i, tensor::full({i + 1}, 10.f * static_cast<float>(i))});
    auto all = c.gather(5, mine, owner);
    if (!all) return all.error();
    if (p != 0 && !all->empty()) return expect(false, "a node got gathered pieces");
    if (p == 0) {
      if (all->size() != 4) return expect(false, "the coordinator got " + std::to_string(all->size()) + " pieces");
      for (int i = 0; i < 4; ++i) {
        const tensor& t = (*all)[static_cast<std::size_t>(i)];
        if (t.numel() != i + 1 || t.data<float>()[i] != 10.f * static_cast<float>(i))
          return expect(false, "piece " + std::to_string(i));
      }
    }
    // refused before anything is sent, on every process alike
    auto two_lines = c.all_gather_text(6, "a\nb");
    if (two_lines || two_lines.error().code != errc::invalid_argument)
      return expect(false, "all_gather_text took two lines");
    if (p == 0) {
      auto huge = c.broadcast_text(7, std::string(control::small_payload, 'x'));
      if (huge || huge.error().code != errc::invalid_argument) return expect(false, "broadcast_text took over 1 MiB");
    }
    return c.finish(10s);
  });
  for (std::size_t p = 0; p < results.size(); ++p) {
    CAPTURE(p);
    CHECK_MESSAGE(results[p].ok(), (results[p].ok() ? "" : results[p].error().message));
  }
}

namespace {

// The coordinator's view of a node that joins, hears the coordinator has set its step, and
// then raises `signal_number` on itself.
lost_node lose_a_node(int signal_number) {
  job_ports ports(2);
  control_options o;
  o.heartbeat = 100ms;
  o.heartbeat_timeout = 800ms;
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child == 0) {
    auto cp = join_job(ports, 1, 2, o);
    if (!cp) ::_exit(3);
    if (!(*cp)->broadcast_text(1, "")) ::_exit(4);  // the coordinator's step is set
    ::raise(signal_number);
    ::_exit(5);  // SIGSTOP: never continued (the test kills it)
  }
  auto cp = join_job(ports, 0, 2, o);
  std::optional<lost_node> lost;
  if (cp) {
    (*cp)->set_step(4);
    if ((*cp)->broadcast_text(1, "go")) lost = (*cp)->wait_lost(10s);
  }
  ::kill(child, SIGKILL);
  int ws = 0;
  ::waitpid(child, &ws, 0);
  REQUIRE_MESSAGE(cp.ok(), (cp.ok() ? "" : cp.error().message));
  REQUIRE(lost);
  return *lost;
}

}  // namespace

TEST_CASE("a node killed with SIGKILL is reported at once with its name and the step and the reason" *
          doctest::test_suite("failure")) {
  lost_node n = lose_a_node(SIGKILL);
  CHECK(n.process == 1);
  CHECK(n.step == 4);
  CHECK(n.reason.find("connection closed without a goodbye") != std::string::npos);
  CHECK(n.describe().find("lost node 1 (pid ") == 0);
}

TEST_CASE("a node stopped with SIGSTOP is reported when its heartbeats stop" * doctest::test_suite("failure")) {
  lost_node n = lose_a_node(SIGSTOP);
  CHECK(n.process == 1);
  CHECK(n.step == 4);
  CHECK(n.reason.find("no heartbeat for 800 ms") != std::string::npos);
}

TEST_CASE("the coordinator relays a lost node to the other nodes and they stop waiting" *
          doctest::test_suite("failure")) {
  // process 2 dies once every process has set its step; process 1 must hear of it from process 0
  auto codes = run_job(3, [](job_ports& ports, int p) -> status {
    auto cp = join_job(ports, p, 3);
    if (!cp) return cp.error();
    (*cp)->set_step(p == 1 ? 6 : 4);
    if (auto go = (*cp)->sum(1, {1.0}); !go) return go.error();  // everyone's step is set
    if (p == 2) ::raise(SIGKILL);
    auto lost = (*cp)->wait_lost(10s);
    if (!lost) return expect(false, "process " + std::to_string(p) + " heard of no loss");
    if (p == 0) return expect(lost->process == 2 && lost->step == 4, "the coordinator's report: " + lost->describe());
    auto waiting = (*cp)->broadcast_text(2, "");  // the next collective fails at once, naming the loss
    if (waiting || waiting.error().code != errc::closed)
      return expect(false, "a collective after the loss did not fail");
    return expect(lost->process == -1 && lost->step == 6 &&
                      lost->describe().find("lost node 2 (pid ") != std::string::npos &&
                      waiting.error().message.find("lost node 2") != std::string::npos,
                  "the relayed report: " + lost->describe());
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
  CHECK(codes[2] == -SIGKILL);
}

TEST_CASE("with keep_going a lost node leaves the others a job whose collectives and data plane go on among them" *
          doctest::test_suite("failure")) {
  // process 2 dies after the first sum; 0 and 1 learn the new membership and sum again among themselves
  auto codes = run_job(3, [](job_ports& ports, int p) -> status {
    control_options o;
    o.keep_going = true;
    auto cp = join_job(ports, p, 3, o);
    if (!cp) return cp.error();
    control_plane& c = **cp;
    std::atomic<int> heard{0};
    c.on_lost([&](const lost_node&) { ++heard; });
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    if (p == 2) ::raise(SIGKILL);
    auto m = c.wait_membership(0, 10s);
    if (!m) return m.error();
    if (m->epoch != 1 || m->live != std::vector<bool>{true, true, false} || m->lost != std::vector<int>{2})
      return expect(false, "process " + std::to_string(p) + ": the wrong membership");
    if (heard != 1) return expect(false, "on_lost ran " + std::to_string(heard.load()) + " times");
    auto total = c.sum(1, {static_cast<double>(p) + 1});  // the same key again: the epoch tells them apart
    if (!total || (*total)[0] != 3.0) return expect(false, "the sum among the survivors");
    auto lines = c.all_gather_text(2, "p" + std::to_string(p));
    if (!lines || *lines != std::vector<std::string>{"p0", "p1", ""}) return expect(false, "all_gather_text");
    // a data plane among the processes that remain: ranks on 0 and 1 only, 2 is never dialled
    auto f = connect_data(data_plane::tcp, ports, c, {0, 1}, 2);
    if (!f) return f.error();
    auto& ch = (*f)->endpoint(p);
    if (p == 0) {
      if (auto st = ch.send(1, 9, tensor::full({3}, 7.f), 10s); !st) return st;
    } else {
      auto got = ch.recv(0, 9, 10s);
      if (!got || got->numel() != 3 || got->data<float>()[2] != 7.f) return expect(false, "the survivors' data plane");
    }
    if (c.lost()) return expect(false, "the job ended");
    return c.finish(10s);
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
  CHECK(codes[2] == -SIGKILL);
}

TEST_CASE("a node that leaves in good order makes a new epoch without it, no loss, and says goodbye at once") {
  // process 2 asks to leave (here: after the first sum); the coordinator lets it go, 0 and 1
  // go on in epoch 1 without it, nobody hears of a loss, 2's goodbye returns at once
  auto codes = run_job(3, [](job_ports& ports, int p) -> status {
    control_options o;
    o.keep_going = true;
    auto cp = join_job(ports, p, 3, o);
    if (!cp) return cp.error();
    control_plane& c = **cp;
    std::atomic<int> heard{0};
    c.on_lost([&](const lost_node&) { ++heard; });
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    // as the runtime does it: every process's line gathered, then the coordinator lets 2 go at
    // once (the gather's result reaches a node before the departure, and counts)
    if (auto moved = c.all_gather_text(3, "moved"); !moved) return moved.error();
    if (p == 0) {
      // the leaver moves on to its goodbye first (it did so in a job): the departure answers it
      std::this_thread::sleep_for(200ms);
      if (auto bad = c.depart(0); bad) return expect(false, "the coordinator let itself leave");
      if (auto st = c.depart(2); !st) return st;
      if (auto again = c.depart(2); again) return expect(false, "a process left twice");
    }
    if (p == 2) {
      if (auto st = c.depart(1); st) return expect(false, "a node let another leave");
      const auto start = std::chrono::steady_clock::now();
      if (auto st = c.finish(10s); !st) return st;
      if (std::chrono::steady_clock::now() - start > 5s) return expect(false, "the leaver's goodbye waited");
      return {};
    }
    auto m = c.wait_membership(0, 10s);
    if (!m) return m.error();
    if (m->epoch != 1 || m->live != std::vector<bool>{true, true, false} || !m->lost.empty() ||
        m->departed != std::vector<int>{2})
      return expect(false, "process " + std::to_string(p) + ": the wrong membership");
    auto total = c.sum(1, {static_cast<double>(p) + 1});
    if (!total || (*total)[0] != 3.0) return expect(false, "the sum without the leaver");
    if (heard != 0 || c.last_loss()) return expect(false, "a departure reported as a loss");
    return c.finish(10s);
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
  CHECK(codes[2] == 0);
}

TEST_CASE("with keep_going a stopped node is fenced out and learns so when it wakes" * doctest::test_suite("failure")) {
  auto codes = run_job(2, [](job_ports& ports, int p) -> status {
    control_options o;
    o.keep_going = true;
    o.heartbeat = 100ms;
    o.heartbeat_timeout = 800ms;
    auto cp = join_job(ports, p, 2, o);
    if (!cp) return cp.error();
    control_plane& c = **cp;
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    if (p == 1) {
      ::raise(SIGSTOP);  // continued by the coordinator once it declared this process lost
      auto lost = c.wait_lost(5s);
      return expect(lost && lost->describe().find("fenced out of the job") != std::string::npos,
                    "the woken node's report: " + (lost ? lost->describe() : std::string("none")));
    }
    auto m = c.wait_membership(0, 10s);
    if (!m) return m.error();
    ::kill(static_cast<pid_t>(c.roster()[1].pid), SIGCONT);
    auto alone = c.sum(2, {5.0});  // the coordinator alone is still a job
    if (!alone || (*alone)[0] != 5.0) return expect(false, "the coordinator's sum alone");
    return c.finish(5s);
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
}

TEST_CASE("a replacement takes a lost node's place: the job's membership, roster, collectives and data plane count it" *
          doctest::test_suite("failure")) {
  // processes 0-2 form the job (admitting replacements); 2 dies after the first sum; the 4th
  // forked process joins as a replacement (refused until a process is lost) and becomes process 2
  // markers between the forked processes: the job formed (process 0), the early join refused (3)
  const std::string formed = temp_path("ctl", "formed"), refused = temp_path("ctl", "refused");
  std::filesystem::remove(formed);
  std::filesystem::remove(refused);
  auto wait_for_file = [](const std::string& f) {
    for (int i = 0; i < 400 && !std::filesystem::exists(f); ++i) std::this_thread::sleep_for(50ms);
    return std::filesystem::exists(f);
  };
  auto codes = run_job(4, [&](job_ports& ports, int p) -> status {
    control_options o;
    o.keep_going = true;
    o.admit_replacements = true;
    if (p == 3) {
      if (!wait_for_file(formed)) return expect(false, "the job never formed");
      o.world = 3;
      o.process = -1;
      o.master_port = ports.control.port();
      o.join_timeout = 20s;
      o.replacement = true;
      plane_result cp = make_error(errc::closed, "not joined");
      bool refused_first = false;
      for (int attempt = 0; attempt < 400; ++attempt) {  // until process 2 is lost (20 s at most)
        cp = control_plane::join(o, ports.data[2].port());
        if (cp || cp.error().message.find("no lost process to replace") == std::string::npos) break;
        if (!refused_first) std::ofstream(refused) << "refused\n";
        refused_first = true;
        std::this_thread::sleep_for(50ms);
      }
      if (!cp) return cp.error();
      control_plane& c = **cp;
      if (c.process() != 2) return expect(false, "the replacement is process " + std::to_string(c.process()));
      const auto m = c.members();
      if (m.epoch != 2 || m.live != std::vector<bool>{true, true, true})
        return expect(false, "the replacement's membership: epoch " + std::to_string(m.epoch));
      if (!refused_first) return expect(false, "a join before the loss was not refused");
      auto total = c.sum(3, {1.0});
      if (!total || (*total)[0] != 3.0) return expect(false, "the replacement's sum");
      auto lines = c.all_gather_text(4, "p2");
      if (!lines || *lines != std::vector<std::string>{"p0", "p1", "p2"}) return expect(false, "all_gather_text");
      auto f = connect_data(data_plane::tcp, ports, c, {0, 1, 2}, 3);
      if (!f) return f.error();
      auto got = (*f)->endpoint(2).recv(0, 9, 10s);
      if (!got || got->numel() != 3 || got->data<float>()[2] != 7.f) return expect(false, "the data plane to it");
      return c.finish(10s);
    }
    auto cp = join_job(ports, p, 3, o);
    if (!cp) return cp.error();
    control_plane& c = **cp;
    if (auto go = c.sum(1, {1.0}); !go) return go.error();
    const auto old_pid = c.roster()[2].pid;
    if (p == 0) std::ofstream(formed) << "formed\n";
    if (p == 2) {
      if (!wait_for_file(refused)) return expect(false, "the early join was never refused");
      ::raise(SIGKILL);
    }
    auto lost = c.wait_membership(0, 10s);
    if (!lost || lost->epoch != 1 || lost->live != std::vector<bool>{true, true, false})
      return expect(false, "process " + std::to_string(p) + ": the membership after the loss");
    auto joined = c.wait_membership(1, 20s);
    if (!joined) return joined.error();
    if (joined->epoch != 2 || joined->live != std::vector<bool>{true, true, true} ||
        joined->replaced != std::vector<int>{2} || joined->lost != std::vector<int>{2})
      return expect(false, "process " + std::to_string(p) + ": the membership after the replacement");
    if (c.roster()[2].pid == old_pid) return expect(false, "the roster still names the lost process");
    auto total = c.sum(3, {1.0});
    if (!total || (*total)[0] != 3.0) return expect(false, "the sum with the replacement");
    auto lines = c.all_gather_text(4, "p" + std::to_string(p));
    if (!lines || *lines != std::vector<std::string>{"p0", "p1", "p2"}) return expect(false, "all_gather_text");
    auto f = connect_data(data_plane::tcp, ports, c, {0, 1, 2}, 3);
    if (!f) return f.error();
    if (p == 0)
      if (auto st = (*f)->endpoint(0).send(2, 9, tensor::full({3}, 7.f), 10s); !st) return st;
    return c.finish(10s);
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
  CHECK(codes[2] == -SIGKILL);
  CHECK(codes[3] == 0);
}
