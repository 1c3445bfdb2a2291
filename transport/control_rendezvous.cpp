// The control plane's rendezvous: the coordinator admits every node (job secret, then a
// hello it checks against the job: world size, a free process number, a port and core
// count in range; anything else is refused with the reason) and sends each the roster; a
// node joins, reads its roster or its refusal, and finds itself in the roster.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>

#include "transport/auth.hpp"
#include "transport/control_codec.hpp"
#include "transport/control_peer.hpp"
#include "transport/control_plane.hpp"

namespace cohort::transport {

using control::kind;
using control::tag_of;
using clock = std::chrono::steady_clock;

namespace {

// Tells a node why it is not let in (and says so on stderr).
void refuse_node(tcp_socket& s, const control_options& o, const std::string& why) {
  std::fprintf(stderr, "cohort: refused a node from %s: %s\n", s.peer_name().c_str(), why.c_str());
  (void)control::write_message(s, o.generation, tag_of(kind::refuse), 0, control::pack_text(why), o.auth_timeout);
}

// One node's handshake, at the start or later: the job secret, then a hello that fits the job
// (its world size, a data port and a core count in range). The hello, or none when the node
// was refused.
std::optional<control::hello> checked_hello(tcp_socket& s, const control_options& o) {
  if (auto st = authenticate_server(s, o.secret, o.auth_timeout); !st) {
    std::fprintf(stderr, "cohort: refused a connection: %s\n", st.error().message.c_str());
    return std::nullopt;
  }
  auto m = control::read_message(s, o.generation, 64, o.auth_timeout);
  if (!m) {
    refuse_node(s, o, m.error().message);
    return std::nullopt;
  }
  auto h = control::hello_of(m->tag, m->body);
  if (!h) {
    refuse_node(s, o, h.error().message);
    return std::nullopt;
  }
  if (h->world != o.world) {
    refuse_node(s, o,
                "the node expects " + std::to_string(h->world) + " processes; this job has " + std::to_string(o.world));
    return std::nullopt;
  }
  if (h->data_port < 1 || h->data_port > 65535 || h->cores < 1 || h->cores > (1 << 16)) {
    refuse_node(s, o, "bad data port " + std::to_string(h->data_port) + " or core count " + std::to_string(h->cores));
    return std::nullopt;
  }
  return *h;
}

}  // namespace

result<std::unique_ptr<control_plane>> control_plane::coordinate(const control_options& o, tcp_listener listener,
                                                                 int data_port) {
  if (o.world < 1) return make_error(errc::invalid_argument, "control: world size must be at least 1");
  std::unique_ptr<control_plane> cp(new control_plane(o, 0));
  cp->roster_.resize(static_cast<std::size_t>(o.world));
  cp->roster_[0] = {0, o.master_host, data_port, static_cast<std::int64_t>(::getpid()), o.cores};
  const auto deadline = clock::now() + o.join_timeout;
  int joined = 1;
  while (joined < o.world) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
    if (left.count() <= 0)
      return make_error(errc::timeout, "control: " + std::to_string(joined) + " of " + std::to_string(o.world) +
                                           " processes joined within " + std::to_string(o.join_timeout.count()) +
                                           " ms");
    auto s = listener.accept(left);
    if (!s) continue;
    auto h = checked_hello(*s, o);
    if (!h) continue;
    int want = static_cast<int>(h->process);
    if (want == -1)
      for (int p = 1; p < o.world && want == -1; ++p)
        if (!cp->peers_[static_cast<std::size_t>(p)]) want = p;
    if (want < 1 || want >= o.world || cp->peers_[static_cast<std::size_t>(want)]) {
      refuse_node(*s, o, "rank " + std::to_string(h->process) + " is not free in a job of " + std::to_string(o.world));
      continue;
    }
    auto p = std::make_unique<peer>();
    p->address = s->peer_name();
    p->pid = h->pid;
    cp->roster_[static_cast<std::size_t>(want)] = {want, s->peer_host(), static_cast<int>(h->data_port), h->pid,
                                                   static_cast<int>(h->cores)};
    p->socket = std::move(*s);
    cp->peers_[static_cast<std::size_t>(want)] = std::move(p);
    ++joined;
  }
  if (o.keep_going && o.admit_replacements)
    cp->listener_.emplace(std::move(listener));  // a replacement may join the running job
  else
    listener.close();  // nobody joins a running job
  const std::string r = control::roster_text(cp->roster_);
  for (int p = 1; p < o.world; ++p) {
    auto& pe = *cp->peers_[static_cast<std::size_t>(p)];
    if (auto st = control::write_message(pe.socket, o.generation, tag_of(kind::roster, static_cast<std::uint64_t>(p)),
                                         0, control::pack_text(r), o.auth_timeout);
        !st)
      return make_error(st.error().code,
                        "control: sending the roster to process " + std::to_string(p) + ": " + st.error().message);
    pe.last_heard = clock::now();
  }
  cp->start_monitor();
  if (cp->listener_) cp->admitter_ = std::thread([p = cp.get()] { p->admit_loop(); });
  return cp;
}

// A late node: the job secret, then a hello asking for a lost process's place (or any: -1).
void control_plane::admit_loop() {
  while (!stopping_) {
    auto s = listener_->accept(milliseconds(200));
    if (!s) continue;
    auto h = checked_hello(*s, o_);
    if (!h) continue;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (lost_) return;  // the job is ending
      auto free = [&](int p) {
        if (p < 1 || p >= o_.world || live_[static_cast<std::size_t>(p)]) return false;
        for (const auto& a : admitted_)
          if (a.process == p) return false;
        return true;
      };
      int want = static_cast<int>(h->process);
      if (want == -1)
        for (int p = 1; p < o_.world && want == -1; ++p)
          if (free(p)) want = p;
      if (free(want)) {
        admission a;
        a.process = want;
        a.entry = {want, s->peer_host(), static_cast<int>(h->data_port), h->pid, static_cast<int>(h->cores)};
        a.socket = std::move(*s);
        admitted_.push_back(std::move(a));
        continue;
      }
      why = h->process == -1 ? "no lost process to replace in the running job"
                             : "process " + std::to_string(h->process) + " is not a lost process of the running job";
    }
    refuse_node(*s, o_, why);
  }
}

// On the monitor thread: each admitted replacement gets the roster and the membership it
// joins; the others learn who joined; then it is live (collectives of the new epoch count it).
void control_plane::install_admissions() {
  std::vector<admission> todo;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    todo.swap(admitted_);
  }
  for (auto& a : todo) {
    auto pe = std::make_unique<peer>();
    pe->address = a.socket.peer_name();
    pe->pid = a.entry.pid;
    pe->socket = std::move(a.socket);
    pe->last_heard = clock::now();
    const int p = a.process;
    peers_[static_cast<std::size_t>(p)] = std::move(pe);  // nobody sends to a process that is not live
    // only this thread changes the coordinator's membership: what it will be, told first
    std::uint64_t epoch = 0;
    std::vector<bool> live;
    std::vector<int> replaced;
    std::string roster;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      epoch = epoch_ + 1;
      live = live_;
      replaced = replaced_;
      replaced.push_back(p);
      live[static_cast<std::size_t>(p)] = true;
      auto r = roster_;
      r[static_cast<std::size_t>(p)] = a.entry;
      roster = control::roster_text(r);
    }
    std::string state = std::to_string(epoch);
    for (bool l : live) state += l ? " 1" : " 0";
    for (int q : replaced) state += " " + std::to_string(q);  // every replacement so far, this one last
    // the roster and the membership before anything else reaches it (a collective of the new epoch)
    if (!send(p, tag_of(kind::roster, static_cast<std::uint64_t>(p)), control::pack_text(roster)) ||
        !send(p, tag_of(kind::admitted), control::pack_text(state))) {
      peers_[static_cast<std::size_t>(p)]->open = false;  // it went before it was in: not a loss
      peers_[static_cast<std::size_t>(p)]->socket.shutdown();
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      roster_[static_cast<std::size_t>(p)] = a.entry;
      live_[static_cast<std::size_t>(p)] = true;
      replaced_.push_back(p);
      last_change_ = "process " + std::to_string(p) + " replaced";
      epoch_ = epoch;
    }
    const std::string joined = std::to_string(epoch) + " " + std::to_string(p) + " " + a.entry.host + " " +
                               std::to_string(a.entry.data_port) + " " + std::to_string(a.entry.pid) + " " +
                               std::to_string(a.entry.cores);
    for (int q = 1; q < o_.world; ++q)
      if (q != p && live[static_cast<std::size_t>(q)]) (void)send(q, tag_of(kind::joined), control::pack_text(joined));
    std::fprintf(stderr, "cohort: process %d (pid %lld at %s) joined the running job in a lost process's place\n", p,
                 static_cast<long long>(a.entry.pid), a.entry.host.c_str());
    changed_.notify_all();
  }
}

result<std::unique_ptr<control_plane>> control_plane::join(const control_options& o, int data_port) {
  if (o.world < 2) return make_error(errc::invalid_argument, "control: joining needs a world of at least 2 processes");
  if (o.process == 0 || o.process < -1 || o.process >= o.world)
    return make_error(errc::invalid_argument,
                      "control: a node's rank must be in 1.." + std::to_string(o.world - 1) + " (or -1)");
  auto s = tcp_socket::connect(o.master_host, o.master_port, o.join_timeout);
  if (!s)
    return make_error(s.error().code, "control: joining " + o.master_host + ":" + std::to_string(o.master_port) + ": " +
                                          s.error().message);
  if (auto st = authenticate_client(*s, o.secret, o.auth_timeout); !st) return st.error();
  const control::hello hello{o.process, static_cast<std::int64_t>(::getpid()), data_port, o.world, o.cores};
  if (auto st =
          control::write_message(*s, o.generation, tag_of(kind::hello), 0, control::pack_hello(hello), o.auth_timeout);
      !st)
    return st.error();
  // a refusal is read whatever its generation (we may be the stale one)
  auto m = control::read_message(*s, o.generation, control::small_payload, o.join_timeout, /*check_generation=*/false);
  if (!m) return make_error(m.error().code, "control: waiting for the roster: " + m.error().message);
  auto body = control::text_of(m->body);
  if (!body) return body.error();
  if (control::is(m->tag, kind::refuse))
    return make_error(errc::invalid_argument, "control: the coordinator refused this node: " + *body);
  if (!control::is(m->tag, kind::roster)) return make_error(errc::io_error, "control: expected the roster");
  auto r = control::parse_roster(*body, o.world);
  if (!r) return r.error();
  const int me = static_cast<int>(control::key_of(m->tag));
  if (me < 1 || me >= o.world || (*r)[static_cast<std::size_t>(me)].pid != ::getpid())
    return make_error(errc::io_error, "control: the roster does not name this process");
  std::unique_ptr<control_plane> cp(new control_plane(o, me));
  if (o.replacement) {  // the running job's membership, which this process joins live
    auto st = control::read_message(*s, o.generation, control::small_payload, o.join_timeout);
    if (!st) return make_error(st.error().code, "control: waiting for the job's membership: " + st.error().message);
    auto text = control::text_of(st->body);
    if (!text) return text.error();
    if (!control::is(st->tag, kind::admitted))
      return make_error(errc::io_error, "control: expected the job's membership");
    std::istringstream in(*text);
    std::uint64_t epoch = 0;
    in >> epoch;
    std::vector<bool> live;
    std::vector<int> replaced;
    int flag = 0;
    for (int p = 0; p < o.world && in >> flag; ++p) live.push_back(flag == 1);
    while (in >> flag) replaced.push_back(flag);
    const bool ok = in.eof() && static_cast<int>(live.size()) == o.world && live[0] &&
                    live[static_cast<std::size_t>(me)] && epoch > 0 && !replaced.empty() && replaced.back() == me &&
                    std::all_of(replaced.begin(), replaced.end(), [&](int q) { return q > 0 && q < o.world; });
    if (!ok) return make_error(errc::io_error, "control: a malformed membership for a replacement: '" + *text + "'");
    cp->epoch_ = epoch;
    cp->live_ = std::move(live);
    cp->replaced_ = std::move(replaced);
    cp->last_change_ = "process " + std::to_string(me) + " replaced";
  }
  cp->roster_ = std::move(*r);
  cp->roster_[0].host = o.master_host;  // the coordinator is where we reached it
  auto p = std::make_unique<peer>();
  p->address = s->peer_name();
  p->pid = cp->roster_[0].pid;
  p->socket = std::move(*s);
  cp->peers_[0] = std::move(p);
  cp->start_monitor();
  return cp;
}

}  // namespace cohort::transport
