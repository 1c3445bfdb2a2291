// The control plane's succession (control_options::succession): when the coordinator is lost,
// the lowest-numbered node of its last membership takes over — once a strict majority of that
// membership (the lost coordinator counted) has reached it on its standby port — and the
// others follow it. Runs on the monitor thread of each node that noticed the loss; nothing
// else reads from the control connections meanwhile.
//
//   successor s (lowest live node)            another node q
//   accept on its standby port  <------------ connect, authenticate (job secret)
//   check "follow q epoch"      <------------ follow {q, epoch}
//   (every other live node in, or the deadline)
//   majority? took_over "E' s COUNT lost.. report" --> the job goes on: s leads, epoch E'
//   no majority: the job ends on every process that reached it, naming why
//
// A node whose epoch differs from the successor's is refused (it missed a change the other saw:
// it ends), as is anything that is not a follow from a live node of the membership.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "transport/auth.hpp"
#include "transport/control_codec.hpp"
#include "transport/control_peer.hpp"
#include "transport/control_plane.hpp"

namespace cohort::transport {

using control::kind;
using control::tag_of;
using clock = std::chrono::steady_clock;

namespace {

milliseconds left_until(clock::time_point deadline) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - clock::now()));
}

}  // namespace

bool control_plane::succeed(lost_node& n) {
  std::vector<bool> live;
  std::uint64_t epoch = 0;
  int standby_port = 0, successor = -1, members = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live = live_;
    epoch = epoch_;
    for (int p = 0; p < o_.world; ++p) {
      if (!live[static_cast<std::size_t>(p)]) continue;
      ++members;
      if (successor < 0 && p != n.process) successor = p;
    }
    if (successor >= 0) standby_port = roster_[static_cast<std::size_t>(successor)].standby_port;
  }
  if (members < 3) {
    n.reason += "; with " + std::to_string(members) + " processes no successor can have a majority";
    return false;
  }
  if (standby_port <= 0) {
    n.reason += "; process " + std::to_string(successor) + " offers no standby port to take over on";
    return false;
  }
  std::fprintf(stderr, "cohort: %s; process %d takes over\n", n.describe().c_str(), successor);
  live[static_cast<std::size_t>(n.process)] = false;
  return successor == process_ ? take_over(n, live, epoch, members / 2 + 1) : follow(n, successor, epoch);
}

bool control_plane::take_over(lost_node& n, const std::vector<bool>& live, std::uint64_t epoch, int needed) {
  const milliseconds wait =
      o_.succession_timeout.count() > 0 ? o_.succession_timeout : 2 * o_.heartbeat_timeout + milliseconds(1000);
  const auto deadline = clock::now() + wait;
  int expected = 0;
  for (int p = 0; p < o_.world; ++p) expected += p != process_ && live[static_cast<std::size_t>(p)] ? 1 : 0;
  std::vector<tcp_socket> followers(static_cast<std::size_t>(o_.world));
  int arrived = 0;
  // once a majority is in, the others get one heartbeat timeout more: a live node notices the
  // coordinator's loss within it, and a node that died with the coordinator never comes (the
  // others' waits for the new membership must not run out meanwhile)
  auto until = deadline;
  while (arrived < expected && clock::now() < until && standby_) {
    auto s = standby_->accept(left_until(until));
    if (!s) continue;
    if (auto st = authenticate_server(*s, o_.secret, std::min(o_.auth_timeout, left_until(deadline))); !st) {
      std::fprintf(stderr, "cohort: refused a connection to the standby port: %s\n", st.error().message.c_str());
      continue;
    }
    auto m = control::read_message(*s, o_.generation, 64, std::min(o_.auth_timeout, left_until(deadline)));
    const auto v = m && control::is(m->tag, kind::follow) ? control::ints_of(m->body) : std::vector<std::int64_t>{};
    std::string why;
    if (m && control::is(m->tag, kind::hello)) {  // a process waiting to join: it asks again once this one leads
      (void)control::write_message(*s, o_.generation, tag_of(kind::refuse), static_cast<std::uint32_t>(process_),
                                   control::pack_text(not_leading), o_.auth_timeout);
      continue;
    }
    if (v.size() != 2)
      why = "expected a follow";
    else if (v[0] < 0 || v[0] >= o_.world || v[0] == process_ || !live[static_cast<std::size_t>(v[0])] ||
             followers[static_cast<std::size_t>(v[0])].fd() >= 0)
      why = "process " + std::to_string(v[0]) + " is no other live process of the job";
    else if (static_cast<std::uint64_t>(v[1]) != epoch)
      why = "its membership epoch " + std::to_string(v[1]) + " is not this one's, " + std::to_string(epoch);
    if (!why.empty()) {
      std::fprintf(stderr, "cohort: refused a follower on the standby port: %s\n", why.c_str());
      (void)control::write_message(*s, o_.generation, tag_of(kind::refuse), static_cast<std::uint32_t>(process_),
                                   control::pack_text(why), o_.auth_timeout);
      continue;
    }
    followers[static_cast<std::size_t>(v[0])] = std::move(*s);
    ++arrived;
    if (arrived + 1 == needed) until = std::min(deadline, clock::now() + o_.heartbeat_timeout);
  }
  const int reached = arrived + 1;
  const int members = expected + 1 + 1;  // the followers expected, this process, the lost coordinator
  if (reached < needed) {
    n.reason += "; process " + std::to_string(process_) + " reached " + std::to_string(reached) + " of the " +
                std::to_string(members) + " processes of the last membership within " + std::to_string(wait.count()) +
                " ms, no majority: the job ends";
    for (auto& f : followers)
      if (f.fd() >= 0)
        (void)control::write_message(f, o_.generation, tag_of(kind::abort_job), static_cast<std::uint32_t>(process_),
                                     control::pack_text("the job ended: " + n.describe()), o_.auth_timeout);
    return false;
  }
  control::succession next;
  next.epoch = epoch + 1;
  next.leader = process_;
  next.lost.push_back(n.process);
  for (int p = 0; p < o_.world; ++p)
    if (p != process_ && live[static_cast<std::size_t>(p)] && followers[static_cast<std::size_t>(p)].fd() < 0)
      next.lost.push_back(p);  // live, but it did not follow in time
  next.report = n.describe();
  // the followers' connections become this coordinator's peers before it is the coordinator
  std::vector<node_entry> roster = this->roster();
  for (int p = 0; p < o_.world; ++p) {
    auto& f = followers[static_cast<std::size_t>(p)];
    if (f.fd() < 0) continue;
    auto pe = std::make_unique<peer>();
    pe->address = f.peer_name();
    pe->pid = roster[static_cast<std::size_t>(p)].pid;
    pe->socket = std::move(f);
    pe->last_heard = clock::now();
    peers_[static_cast<std::size_t>(p)] = std::move(pe);
  }
  if (auto& old = peers_[static_cast<std::size_t>(n.process)]; old) old->socket.shutdown();
  const std::string text = control::succession_text(next);
  for (int p = 0; p < o_.world; ++p)
    if (p != process_ && peers_[static_cast<std::size_t>(p)] && peers_[static_cast<std::size_t>(p)]->open &&
        live[static_cast<std::size_t>(p)])
      if (!send(p, tag_of(kind::took_over), control::pack_text(text)))
        peers_[static_cast<std::size_t>(p)]->open = false;
  std::function<void(const lost_node&)> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int p : next.lost) {
      live_[static_cast<std::size_t>(p)] = false;
      lost_processes_.push_back(p);
    }
    n.epoch = next.epoch;
    losses_.push_back(n);
    last_change_ = "the coordinator (process " + std::to_string(n.process) + ") lost, process " +
                   std::to_string(process_) + " took over";
    epoch_ = next.epoch;
    leader_ = process_;
    callback = on_lost_;
    ++telling_;
  }
  // a replacement or a new process joins the running job here from now on (the launcher
  // learns where from the driver's note, $COHORT_LAUNCH_LEADER; a process that waited to join
  // at the lost coordinator asks here again): before the runtime hears of the loss
  if (o_.keep_going && (o_.admit_replacements || o_.admit_joins)) admit_at_standby();
  std::fprintf(stderr, "cohort: process %d took over as the coordinator (%d of %d processes followed)\n", process_,
               arrived, expected);
  if (callback) callback(n);
  told_lost();
  return true;
}

bool control_plane::follow(lost_node& n, int successor, std::uint64_t epoch) {
  const milliseconds wait =
      o_.succession_timeout.count() > 0 ? o_.succession_timeout : 2 * o_.heartbeat_timeout + milliseconds(1000);
  const auto deadline = clock::now() + wait;
  const node_entry to = roster()[static_cast<std::size_t>(successor)];
  std::string why = "nobody answered";
  while (clock::now() < deadline) {
    auto s = tcp_socket::connect(to.host, to.standby_port, left_until(deadline));
    if (!s) {
      why = s.error().message;
      std::this_thread::sleep_for(milliseconds(20));
      continue;
    }
    // the successor may not have noticed the loss yet: its accept waits until it does
    if (auto st = authenticate_client(*s, o_.secret, left_until(deadline)); !st) {
      why = st.error().message;
      continue;
    }
    if (auto st = control::write_message(*s, o_.generation, tag_of(kind::follow), static_cast<std::uint32_t>(process_),
                                         control::pack_ints({process_, static_cast<std::int64_t>(epoch)}),
                                         left_until(deadline));
        !st) {
      why = st.error().message;
      continue;
    }
    // the successor answers once it has waited for the others, which may take its whole wait
    // from when it noticed the loss, later than this node did: as long again from here
    auto m = control::read_message(*s, o_.generation, control::small_payload, wait + milliseconds(1000));
    if (!m) {
      why = m.error().message;
      break;  // it took this node in and then failed or gave up: no second try
    }
    auto text = control::text_of(m->body);
    if (!control::is(m->tag, kind::took_over) || !text) {
      why = text ? *text : "a malformed answer";
      break;
    }
    auto next = control::parse_succession(*text, o_.world);
    if (!next || next->epoch != epoch + 1 || next->leader != successor ||
        std::find(next->lost.begin(), next->lost.end(), process_) != next->lost.end()) {
      why = "a succession that does not fit this node: '" + text->substr(0, 200) + "'";
      break;
    }
    auto pe = std::make_unique<peer>();
    pe->address = s->peer_name();
    pe->pid = to.pid;
    pe->socket = std::move(*s);
    pe->last_heard = clock::now();
    peers_[static_cast<std::size_t>(successor)] = std::move(pe);
    if (auto& old = peers_[static_cast<std::size_t>(n.process)]; old) old->socket.shutdown();
    lost_node relayed;
    relayed.process = -1;  // named by the successor's report
    relayed.coordinator = true;
    relayed.reason = next->report;
    relayed.step = n.step;
    std::function<void(const lost_node&)> callback;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int p : next->lost)
        if (live_[static_cast<std::size_t>(p)]) {
          live_[static_cast<std::size_t>(p)] = false;
          lost_processes_.push_back(p);
        }
      relayed.epoch = next->epoch;
      losses_.push_back(relayed);
      last_change_ = "the coordinator (process " + std::to_string(n.process) + ") lost, process " +
                     std::to_string(successor) + " took over";
      epoch_ = next->epoch;
      leader_ = successor;
      callback = on_lost_;
      ++telling_;
    }
    n = relayed;
    if (callback) callback(relayed);
    told_lost();
    return true;
  }
  n.reason += "; process " + std::to_string(successor) + " did not take over: " + why;
  return false;
}

}  // namespace cohort::transport
