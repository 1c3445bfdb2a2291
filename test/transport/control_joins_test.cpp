// Processes joining the running job at the control plane: admitted at the coordinator's word
// (one new epoch), one beyond the slots waiting as a spare, wrong secrets and stale generations
// refused; a loss before the admission admits nobody; a job that cannot grow refuses them.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "control_plane_support.hpp"
#include "process_job.hpp"
#include "transport/control_plane.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace cohort::test;
using namespace std::chrono_literals;

TEST_CASE(
    "a process joins the running job at the coordinator's word, one beyond its slots waits, bad ones are refused") {
  // the job starts with processes 0 and 1 of at most 3 slots; while it runs (sums), a joiner with
  // a wrong secret and one of a stale generation are refused; the right one waits until the
  // coordinator admits it (one new epoch), a fourth waits as a spare and is dismissed at the end
  job_ports ports(4);
  control_options o = job_options(ports, 3);
  o.secret = "right secret";
  o.keep_going = true;
  o.admit_joins = true;
  o.initial = 2;
  coordinator c(ports, o);
  control_options start = o;
  start.world = 2;  // what a node of the job's start knows: its size
  auto node = join_as(start, 1, ports.data[1].port());
  control_plane& coord = c.get();
  REQUIRE(node);
  control_plane& one = **node;
  CHECK(coord.members().live == std::vector<bool>{true, true, false});
  CHECK(one.members().live == std::vector<bool>{true, true, false});
  CHECK(one.world() == 3);
  CHECK(coord.roster()[2].pid == 0);  // an empty slot
  auto both_sum = [&](std::uint64_t key) {
    double at_one = 0;
    std::thread t([&] {
      auto s = one.sum(key, {2.0});
      at_one = s ? (*s)[0] : -1;
    });
    auto s = coord.sum(key, {1.0});
    t.join();
    return s && (*s)[0] == 3.0 && at_one == 3.0;
  };
  CHECK(both_sum(10));

  control_options joiner = o;
  joiner.world = 0;  // joining the running job, whatever its size
  joiner.process = -1;
  control_options wrong = joiner;
  wrong.secret = "wrong secret";
  CHECK(refusal(control_plane::join(wrong, ports.data[2].port())).find("authentication failed") != std::string::npos);
  control_options stale = joiner;
  stale.generation = 0;
  CHECK(refusal(control_plane::join(stale, ports.data[2].port())).find("stale generation") != std::string::npos);
  CHECK(both_sum(11));  // the job runs on undisturbed
  CHECK(coord.members().epoch == 0);

  plane_result newcomer = make_error(errc::closed, "not joined");
  std::thread joining([&] { newcomer = control_plane::join(joiner, ports.data[2].port()); });
  for (int i = 0; i < 400 && coord.joiners_waiting() < 1; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(coord.joiners_waiting() == 1);
  CHECK(both_sum(12));  // waiting changes nothing until the coordinator admits it
  plane_result spare = make_error(errc::closed, "not joined");
  std::thread waiting([&] { spare = control_plane::join(joiner, ports.data[3].port()); });
  std::this_thread::sleep_for(200ms);
  CHECK(coord.joiners_waiting() == 1);  // one empty slot: the other is a spare
  auto admitted = coord.admit_joiners(5, 10s);
  joining.join();
  REQUIRE(admitted);
  CHECK(admitted->epoch == 1);
  CHECK(admitted->live == std::vector<bool>{true, true, true});
  CHECK(admitted->joined == std::vector<int>{2});
  REQUIRE_MESSAGE(newcomer, refusal(newcomer));
  control_plane& two = **newcomer;
  CHECK(two.process() == 2);
  CHECK(two.world() == 3);
  CHECK(two.arrived_as() == arrival::join);
  CHECK(two.members().live == std::vector<bool>{true, true, true});
  auto seen = one.wait_membership(0, 10s);
  REQUIRE(seen);
  CHECK(seen->epoch == 1);
  CHECK(seen->joined == std::vector<int>{2});
  CHECK(one.roster()[2].data_port == ports.data[2].port());
  CHECK(coord.joiners_waiting() == 0);  // the job is full
  // all three in the new epoch
  double at_one = 0, at_two = 0;
  std::thread t1([&] {
    auto s = one.sum(13, {2.0}, 1);
    at_one = s ? (*s)[0] : -1;
  });
  std::thread t2([&] {
    auto s = two.sum(13, {4.0}, 1);
    at_two = s ? (*s)[0] : -1;
  });
  auto s0 = coord.sum(13, {1.0}, 1);
  t1.join();
  t2.join();
  CHECK((s0 && (*s0)[0] == 7.0));
  CHECK(at_one == 7.0);
  CHECK(at_two == 7.0);
  // nobody left to admit: still a new epoch (the nodes wait for one)
  auto none = coord.admit_joiners(0, 10s);
  REQUIRE(none);
  CHECK(none->epoch == 2);
  CHECK(none->joined == std::vector<int>{2});
  REQUIRE(one.wait_membership(1, 10s));
  REQUIRE(two.wait_membership(1, 10s));
  finish_all({&coord, &one, &two});
  waiting.join();
  CHECK(refusal(spare).find(not_needed) != std::string::npos);
  CHECK((!spare && spare.error().code == errc::closed));
}

TEST_CASE("a process lost before the coordinator admits joiners: nobody is admitted and the loss is the one change" *
          doctest::test_suite("failure")) {
  // processes 0-2 of at most 4 slots and one process waiting to join; process 2 goes without a
  // goodbye at the step boundary; the coordinator's admission for the membership it knew (0-2
  // live) admits nobody and adds no epoch: every node sees the loss alone (epoch 1); the joiner
  // still waits and an admission for the membership after the loss takes it (into slot 2)
  job_ports ports(4);
  control_options o = job_options(ports, 4);
  o.keep_going = true;
  o.admit_joins = true;
  o.initial = 3;
  coordinator c(ports, o);
  control_options start = o;
  start.world = 3;
  plane_result node2 = make_error(errc::closed, "not joined");
  std::thread t2([&] { node2 = join_as(start, 2, ports.data[2].port()); });
  auto node1 = join_as(start, 1, ports.data[1].port());
  t2.join();
  control_plane& coord = c.get();
  REQUIRE(node1);
  REQUIRE(node2);
  control_options joiner = o;
  joiner.world = 0;
  joiner.process = -1;
  plane_result newcomer = make_error(errc::closed, "not joined");
  std::thread joining([&] { newcomer = control_plane::join(joiner, ports.data[3].port()); });
  for (int i = 0; i < 400 && coord.joiners_waiting() < 1; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(coord.joiners_waiting() == 1);
  node2->reset();  // gone without a goodbye
  for (int i = 0; i < 400 && coord.members().live[2]; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE_FALSE(coord.members().live[2]);
  auto declined = coord.admit_joiners(1, 10s, std::vector<bool>{true, true, true, false});
  REQUIRE(declined);
  CHECK(declined->epoch == 1);
  CHECK(declined->joined.empty());
  CHECK(declined->live == std::vector<bool>{true, true, false, false});
  CHECK(coord.joiners_waiting() == 1);  // it goes on waiting
  auto seen = (*node1)->wait_membership(0, 10s);
  REQUIRE(seen);
  CHECK(seen->epoch == 1);
  CHECK(seen->lost == std::vector<int>{2});
  auto wrong = coord.admit_joiners(1, 10s, std::vector<bool>{true, true});
  CHECK((!wrong && wrong.error().message.find("2 processes known live in a job of 4") != std::string::npos));
  auto admitted = coord.admit_joiners(1, 10s, declined->live);
  joining.join();
  REQUIRE(admitted);
  CHECK(admitted->epoch == 2);
  CHECK(admitted->joined == std::vector<int>{2});
  REQUIRE_MESSAGE(newcomer, refusal(newcomer));
  CHECK((*newcomer)->process() == 2);
  REQUIRE((*node1)->wait_membership(1, 10s));
  finish_all({&coord, node1->get(), newcomer->get()});
}

TEST_CASE("a node of the job's start or a replacement is not taken for a process joining the running job") {
  // a job that cannot grow (here: one that takes replacements) refuses a process asking to join
  // it; admit_joiners is the coordinator's
  job_ports ports(3);
  control_options o = job_options(ports, 2);
  o.keep_going = true;
  o.admit_replacements = true;
  coordinator c(ports, o);
  auto node = join_as(o, 1, ports.data[1].port());
  control_plane& coord = c.get();
  REQUIRE(node);
  CHECK((*node)->arrived_as() == arrival::start);
  control_options joiner = o;
  joiner.world = 0;
  joiner.process = -1;
  CHECK(refusal(control_plane::join(joiner, ports.data[2].port())) ==
        "control: the coordinator refused this node: this job takes no new processes (its coordinator was not "
        "started with --elastic.max-procs)");
  auto not_mine = (*node)->admit_joiners(1, 1s);
  CHECK((!not_mine && not_mine.error().message == "control: only the coordinator admits processes"));
  CHECK(coord.joiners_waiting() == 0);
  finish_all({&coord, node->get()});
}
