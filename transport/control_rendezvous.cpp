// The control plane's rendezvous: the coordinator admits every node (job secret, then a
// hello it checks against the job: world size, a free process number, a port and core
// count in range; anything else is refused with the reason) and sends each the roster; a
// node joins, reads its roster or its refusal, and finds itself in the roster.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>
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

constexpr const char* no_joins =
    "this job takes no new processes (its coordinator was not started with --elastic.max-procs)";

// Tells a node why it is not let in (and says so on stderr).
void refuse_node(tcp_socket& s, const control_options& o, const std::string& why) {
  std::fprintf(stderr, "cohort: refused a node from %s: %s\n", s.peer_name().c_str(), why.c_str());
  (void)control::write_message(s, o.generation, tag_of(kind::refuse), 0, control::pack_text(why), o.auth_timeout);
}

// One node's handshake, at the start or later: the job secret, then a hello that fits the job
// (the size it started with, or 0 from a process joining the running job; a data port and a
// core count in range). The hello, or none when the node was refused.
std::optional<control::hello> checked_hello(tcp_socket& s, const control_options& o, int initial) {
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
  if (h->world != initial && h->world != 0) {  // 0: a process for the running job, whatever its size
    refuse_node(s, o,
                "the node expects " + std::to_string(h->world) + " processes; this job has " + std::to_string(initial));
    return std::nullopt;
  }
  if (h->data_port < 1 || h->data_port > 65535 || h->cores < 1 || h->cores > (1 << 16) || h->standby_port < 0 ||
      h->standby_port > 65535) {
    refuse_node(s, o,
                "bad data port " + std::to_string(h->data_port) + ", core count " + std::to_string(h->cores) +
                    " or standby port " + std::to_string(h->standby_port));
    return std::nullopt;
  }
  return *h;
}

}  // namespace

result<std::unique_ptr<control_plane>> control_plane::coordinate(const control_options& o, tcp_listener listener,
                                                                 int data_port) {
  if (o.world < 1 || o.world > control::max_world)
    return make_error(errc::invalid_argument, "control: world size must be 1.." + std::to_string(control::max_world));
  const int initial = o.initial > 0 ? o.initial : o.world;
  if (initial > o.world)
    return make_error(
        errc::invalid_argument,
        "control: " + std::to_string(initial) + " processes cannot start a job of at most " + std::to_string(o.world));
  if (initial < o.world && !(o.keep_going && o.admit_joins))
    return make_error(errc::invalid_argument, "control: empty slots need a job that admits joining processes");
  std::unique_ptr<control_plane> cp(new control_plane(o, 0));
  cp->roster_.resize(static_cast<std::size_t>(o.world));
  for (int p = 0; p < o.world; ++p) cp->roster_[static_cast<std::size_t>(p)].process = p;
  cp->roster_[0] = {0, o.master_host, data_port, static_cast<std::int64_t>(::getpid()), o.cores, 0};
  for (int p = initial; p < o.world; ++p) cp->live_[static_cast<std::size_t>(p)] = false;
  const auto deadline = clock::now() + o.join_timeout;
  int joined = 1;
  while (joined < initial) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
    if (left.count() <= 0)
      return make_error(errc::timeout, "control: " + std::to_string(joined) + " of " + std::to_string(initial) +
                                           " processes joined within " + std::to_string(o.join_timeout.count()) +
                                           " ms");
    auto s = listener.accept(left);
    if (!s) continue;
    auto h = checked_hello(*s, o, initial);
    if (!h) continue;
    if (h->world == 0) {  // for the running job: it waits until the job runs and admits it
      if (!o.keep_going || !o.admit_joins) {
        refuse_node(*s, o, no_joins);
        continue;
      }
      admission a;
      a.entry = {-1,
                 s->peer_host(),
                 static_cast<int>(h->data_port),
                 h->pid,
                 static_cast<int>(h->cores),
                 static_cast<int>(h->standby_port)};
      a.socket = std::move(*s);
      cp->waiting_.push_back(std::move(a));
      continue;
    }
    int want = static_cast<int>(h->process);
    if (want == -1)
      for (int p = 1; p < initial && want == -1; ++p)
        if (!cp->peers_[static_cast<std::size_t>(p)]) want = p;
    if (want < 1 || want >= initial || cp->peers_[static_cast<std::size_t>(want)]) {
      refuse_node(*s, o, "rank " + std::to_string(h->process) + " is not free in a job of " + std::to_string(initial));
      continue;
    }
    auto p = std::make_unique<peer>();
    p->address = s->peer_name();
    p->pid = h->pid;
    cp->roster_[static_cast<std::size_t>(want)] = {want,
                                                   s->peer_host(),
                                                   static_cast<int>(h->data_port),
                                                   h->pid,
                                                   static_cast<int>(h->cores),
                                                   static_cast<int>(h->standby_port)};
    p->socket = std::move(*s);
    cp->peers_[static_cast<std::size_t>(want)] = std::move(p);
    ++joined;
  }
  if (o.keep_going && (o.admit_replacements || o.admit_joins))
    cp->listener_.emplace(std::move(listener));  // a replacement or a new process may join the running job
  else
    listener.close();  // nobody joins a running job
  const std::string r = control::roster_text(cp->roster_);
  const std::string m = control::membership_text(cp->members());
  for (int p = 1; p < initial; ++p) {
    auto& pe = *cp->peers_[static_cast<std::size_t>(p)];
    for (auto [k, text] :
         {std::pair{tag_of(kind::roster, static_cast<std::uint64_t>(p)), &r}, std::pair{tag_of(kind::admitted), &m}})
      if (auto st = control::write_message(pe.socket, o.generation, k, 0, control::pack_text(*text), o.auth_timeout);
          !st)
        return make_error(st.error().code,
                          "control: sending the roster to process " + std::to_string(p) + ": " + st.error().message);
    pe.last_heard = clock::now();
  }
  for (auto& a : cp->waiting_) (void)cp->tell_standbys(a.socket);  // one that is gone is dropped later
  cp->start_monitor();
  if (cp->listener_) {
    cp->admitting_ = true;
    cp->admitter_ = std::thread([p = cp.get()] { p->admit_loop(); });
  }
  return cp;
}

// A late node: the job secret, then a hello asking for a lost process's place (a replacement:
// the job's first size, its rank or -1), or for any place in the running job (world 0).
void control_plane::admit_loop() {
  const int initial = o_.initial > 0 ? o_.initial : o_.world;
  while (!stopping_) {
    auto s = listener_->accept(milliseconds(200));
    if (!s) continue;
    auto h = checked_hello(*s, o_, initial);
    if (!h) continue;
    std::string why;
    bool told = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (lost_ || stopping_) return;  // the job is ending
      if (h->world == 0) {
        if (!o_.admit_joins) {
          why = no_joins;
        } else if (waiting_.size() >= 64) {
          why = "64 processes already wait to join this job";
        } else {
          if (!told) {  // where it waits again should this coordinator be lost: told outside the lock
            lock.unlock();
            if (!tell_standbys(*s)) continue;  // gone already
            told = true;
            lock.lock();
            if (lost_ || stopping_) return;
          }
          admission a;
          a.entry = {-1,
                     s->peer_host(),
                     static_cast<int>(h->data_port),
                     h->pid,
                     static_cast<int>(h->cores),
                     static_cast<int>(h->standby_port)};
          a.socket = std::move(*s);
          waiting_.push_back(std::move(a));
          continue;
        }
      } else if (!o_.admit_replacements) {
        why = "this job takes no replacements (--fault.replace-wait-ms is 0)";
      } else {
        auto free = [&](int p) {
          if (p < 1 || p >= o_.world || live_[static_cast<std::size_t>(p)] ||
              std::find(lost_processes_.begin(), lost_processes_.end(), p) == lost_processes_.end())
            return false;
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
          a.entry = {want,
                     s->peer_host(),
                     static_cast<int>(h->data_port),
                     h->pid,
                     static_cast<int>(h->cores),
                     static_cast<int>(h->standby_port)};
          a.socket = std::move(*s);
          admitted_.push_back(std::move(a));
          continue;
        }
        why = h->process == -1 ? "no lost process to replace in the running job"
                               : "process " + std::to_string(h->process) + " is not a lost process of the running job";
      }
    }
    refuse_node(*s, o_, why);
  }
}

namespace {

// A waiting process whose connection has closed (or sent anything: it must wait in silence).
bool gone(tcp_socket& s) {
  pollfd p{s.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && p.revents != 0;
}

}  // namespace

int control_plane::joiners_waiting() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!is_leader()) return 0;
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), [](admission& a) { return gone(a.socket); }),
                 waiting_.end());
  int empty = 0;
  for (int p = 1; p < o_.world; ++p) {
    bool reserved = false;
    for (const auto& a : admitted_) reserved = reserved || a.process == p;
    empty += !live_[static_cast<std::size_t>(p)] && !reserved ? 1 : 0;
  }
  return std::min(empty, static_cast<int>(waiting_.size()));
}

result<membership> control_plane::admit_joiners(int count, milliseconds timeout,
                                                std::optional<std::vector<bool>> known_live) {
  if (!is_leader()) return make_error(errc::invalid_argument, "control: only the coordinator admits processes");
  if (!admitting_) return make_error(errc::invalid_argument, "control: this job admits no processes");
  std::unique_lock<std::mutex> lock(mutex_);
  if (lost_) return make_error(errc::closed, lost_->describe());
  if (known_live && known_live->size() != live_.size())
    return make_error(errc::invalid_argument, "control: admit_joiners: " + std::to_string(known_live->size()) +
                                                  " processes known live in a job of " + std::to_string(live_.size()));
  release_unless_lost_ = std::move(known_live);
  release_ = std::max(0, count);
  if (!changed_.wait_for(lock, timeout, [&] { return release_ < 0 || lost_.has_value(); }))
    return make_error(errc::timeout, "control: the joining processes were not admitted within " +
                                         std::to_string(timeout.count()) + " ms");
  if (lost_) return make_error(errc::closed, lost_->describe());
  return membership{epoch_, live_, lost_processes_, replaced_, departed_, joined_, leader_.load()};
}

std::vector<std::pair<std::string, int>> control_plane::standby_order() const {
  std::vector<std::pair<std::string, int>> order;
  std::lock_guard<std::mutex> lock(mutex_);
  for (int p = 0; p < o_.world; ++p) {
    const auto& n = roster_[static_cast<std::size_t>(p)];
    if (p != process_ && live_[static_cast<std::size_t>(p)] && n.standby_port > 0)
      order.emplace_back(n.host, n.standby_port);
  }
  return order;
}

bool control_plane::tell_standbys(tcp_socket& s) {
  std::vector<control::standby_address> order;
  for (auto& [host, port] : standby_order()) order.push_back({host, port});
  return control::write_message(s, o_.generation, tag_of(kind::standby), static_cast<std::uint32_t>(process_),
                                control::pack_text(control::standby_text(order)), o_.auth_timeout)
      .ok();
}

void control_plane::dismiss_waiting() {
  std::vector<admission> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(waiting_);
  }
  for (auto& a : waiting) {
    (void)control::write_message(a.socket, o_.generation, tag_of(kind::refuse), 0, control::pack_text(not_needed),
                                 o_.auth_timeout);
    a.socket.shutdown();
  }
}

// On the monitor thread: each admitted replacement is installed at once (its own epoch); the
// processes waiting to join when the runtime asks (admit_joiners), together.
void control_plane::install_admissions() {
  std::vector<admission> replacements, joiners;
  bool release = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    replacements.swap(admitted_);
    bool lost_since = false;  // a process the caller counts live is lost (declared by this thread before)
    if (release_ >= 0 && release_unless_lost_)
      for (std::size_t p = 0; p < live_.size(); ++p)
        lost_since = lost_since || ((*release_unless_lost_)[p] && !live_[p]);
    if (lost_since) {  // nobody is admitted and no epoch added: the loss is the change everyone sees
      release_ = -1;
      changed_.notify_all();
    } else if (release_ >= 0) {
      release = true;
      std::vector<bool> taken = live_;
      for (const auto& a : replacements) taken[static_cast<std::size_t>(a.process)] = true;
      auto w = waiting_.begin();
      for (int p = 1; p < o_.world && static_cast<int>(joiners.size()) < release_ && w != waiting_.end(); ++p) {
        if (taken[static_cast<std::size_t>(p)]) continue;
        while (w != waiting_.end() && gone(w->socket)) w = waiting_.erase(w);
        if (w == waiting_.end()) break;
        w->process = p;
        w->entry.process = p;
        joiners.push_back(std::move(*w));
        w = waiting_.erase(w);
      }
    }
  }
  for (auto& a : replacements) {
    std::vector<admission> one;
    one.push_back(std::move(a));
    install_batch(std::move(one), true);
  }
  if (!release) return;
  install_batch(std::move(joiners), false);  // a new epoch even for none: the nodes wait for one
  {
    std::lock_guard<std::mutex> lock(mutex_);
    release_ = -1;
  }
  changed_.notify_all();
}

void control_plane::install_batch(std::vector<admission> batch, bool replacements) {
  // their roster first; one whose connection fails here went before it was in (not a loss)
  std::string roster;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto r = roster_;
    for (const auto& a : batch) r[static_cast<std::size_t>(a.process)] = a.entry;
    roster = control::roster_text(r);
  }
  std::vector<admission> in;
  for (auto& a : batch) {
    auto pe = std::make_unique<peer>();
    pe->address = a.socket.peer_name();
    pe->pid = a.entry.pid;
    pe->socket = std::move(a.socket);
    pe->last_heard = clock::now();
    const int p = a.process;
    peers_[static_cast<std::size_t>(p)] = std::move(pe);  // nobody sends to a process that is not live
    if (!send(p, tag_of(kind::roster, static_cast<std::uint64_t>(p)), control::pack_text(roster))) {
      peers_[static_cast<std::size_t>(p)]->open = false;
      peers_[static_cast<std::size_t>(p)]->socket.shutdown();
      continue;
    }
    in.push_back(std::move(a));
  }
  // only this thread changes the coordinator's membership: what it will be, told first
  membership next;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    next = {epoch_ + 1, live_, lost_processes_, replaced_, departed_, joined_, leader_.load()};
  }
  std::vector<control::joined_entry> told;
  for (const auto& a : in) {
    next.live[static_cast<std::size_t>(a.process)] = true;
    (replacements ? next.replaced : next.joined).push_back(a.process);
    told.push_back({a.entry, replacements});
  }
  const std::string state = control::membership_text(next);
  for (const auto& a : in) (void)send(a.process, tag_of(kind::admitted), control::pack_text(state));
  const auto before = members().live;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& a : in) roster_[static_cast<std::size_t>(a.process)] = a.entry;
    live_ = next.live;
    replaced_ = next.replaced;
    joined_ = next.joined;
    std::string who;
    for (const auto& a : in) who += (who.empty() ? "process " : ", process ") + std::to_string(a.process);
    last_change_ = in.empty() ? "nobody admitted" : who + (replacements ? " replaced" : " joined");
    epoch_ = next.epoch;
  }
  const std::string joined = control::joined_text(next.epoch, told);
  for (int q = 0; q < o_.world; ++q)
    if (q != process_ && before[static_cast<std::size_t>(q)])
      (void)send(q, tag_of(kind::joined), control::pack_text(joined));
  for (const auto& a : in)
    std::fprintf(stderr, "cohort: process %d (pid %lld at %s) joined the running job%s\n", a.process,
                 static_cast<long long>(a.entry.pid), a.entry.host.c_str(),
                 replacements ? " in a lost process's place" : "");
  changed_.notify_all();
}

namespace {

milliseconds left_until(clock::time_point deadline) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - clock::now()));
}

struct reconnected {
  tcp_socket socket;
  std::string host;
};

// A process waiting to join whose coordinator was lost: the standby ports it was told, in
// succession order, until one takes it in — the one that took over admits at its standby port
// (a node still gathering its followers refuses anything else, a node that does not lead does
// not answer: both are tried again shortly), until `give_up`.
result<reconnected> ask_again(const control_options& o, const control::hello& hello,
                              const std::vector<control::standby_address>& order, clock::time_point give_up) {
  std::string last = "nobody answered";
  while (clock::now() < give_up) {
    for (const auto& at : order) {
      // short: a node that does not lead never answers (its standby port only queues the connection)
      const auto patience = std::min(milliseconds(250), left_until(give_up));
      auto s = tcp_socket::connect(at.host, at.port, patience);
      if (s && authenticate_client(*s, o.secret, patience)) {
        if (control::write_message(*s, o.generation, tag_of(kind::hello), 0, control::pack_hello(hello), patience)) {
          // its first word: a refusal from a node that does not lead (tried again), or what a
          // coordinator sends a waiting process (the standby order, the roster)
          pollfd p{s->fd(), POLLIN, 0};
          if (::poll(&p, 1, static_cast<int>(patience.count())) > 0) {
            std::fprintf(stderr, "cohort: asked to join again at %s:%d\n", at.host.c_str(), at.port);
            return reconnected{std::move(*s), at.host};
          }
          last = at.host + ":" + std::to_string(at.port) + " did not answer";
          continue;
        }
      }
      last = at.host + ":" + std::to_string(at.port) + ": " + (s ? "no answer to the handshake" : s.error().message);
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return make_error(errc::timeout, "no process of the job took this process in (last: " + last + ")");
}

}  // namespace

result<std::unique_ptr<control_plane>> control_plane::join(const control_options& o, int data_port) {
  const bool running = o.world == 0;  // joining the running job, whatever its size
  if (!running && o.world < 2)
    return make_error(errc::invalid_argument, "control: joining needs a world of at least 2 processes");
  if (o.process == 0 || o.process < -1 || (!running && o.process >= o.world) || (running && o.process != -1))
    return make_error(errc::invalid_argument,
                      running ? std::string("control: a process joining a running job takes the place it is given")
                              : "control: a node's rank must be in 1.." + std::to_string(o.world - 1) + " (or -1)");
  // with succession, where this node would take over as the coordinator
  std::optional<tcp_listener> standby;
  if (o.succession && o.keep_going) {
    auto l = tcp_listener::open(o.standby_host, 0);
    if (!l) return make_error(l.error().code, "control: the standby port: " + l.error().message);
    standby.emplace(std::move(*l));
  }
  const control::hello hello{o.process, static_cast<std::int64_t>(::getpid()), data_port, o.world,
                             o.cores,   standby ? standby->port() : 0};
  // a process waiting to join the running job learns where the job goes on should its
  // coordinator be lost, and asks there again (ask_again); one joining again knows it already
  std::vector<control::standby_address> standbys;
  if (running)
    for (const auto& [host, port] : o.standbys) standbys.push_back({host, port});
  std::string coordinator_host = o.master_host;
  const auto give_up = clock::now() + o.join_timeout;
  // (a lost coordinator's port may still take connections, held by its launcher: the
  // handshake is what tells; asked for a second only when the job's other processes are known)
  const auto patience = [&](milliseconds full) { return standbys.empty() ? full : std::min(milliseconds(1000), full); };
  auto s = tcp_socket::connect(o.master_host, o.master_port, patience(o.join_timeout));
  status greeted = s ? authenticate_client(*s, o.secret, patience(o.auth_timeout)) : status(s.error());
  if (greeted)
    greeted =
        control::write_message(*s, o.generation, tag_of(kind::hello), 0, control::pack_hello(hello), o.auth_timeout);
  if (!greeted && !standbys.empty()) {
    std::fprintf(stderr, "cohort: the coordinator at %s:%d does not answer (%s); asking the job's other processes\n",
                 o.master_host.c_str(), o.master_port, greeted.error().message.c_str());
    auto again = ask_again(o, hello, standbys, give_up);
    if (!again) return make_error(again.error().code, "control: joining again: " + again.error().message);
    coordinator_host = again->host;
    s = std::move(again->socket);
  } else if (!s) {
    return make_error(s.error().code, "control: joining " + o.master_host + ":" + std::to_string(o.master_port) + ": " +
                                          s.error().message);
  } else if (!greeted) {
    return greeted.error();
  }
  // a refusal is read whatever its generation (we may be the stale one)
  result<control::message> m = make_error(errc::closed, "not read");
  for (;;) {
    m = control::read_message(*s, o.generation, control::small_payload, left_until(give_up),
                              /*check_generation=*/false);
    if (m && running && control::is(m->tag, kind::standby)) {
      auto text = control::text_of(m->body);
      if (!text) return text.error();
      auto order = control::parse_standbys(*text);
      if (!order) return order.error();
      standbys = std::move(*order);
      continue;
    }
    const bool lost = !m && m.error().code == errc::closed;
    bool not_yet = false;  // a node still gathering its followers after the loss
    if (m && control::is(m->tag, kind::refuse))
      if (auto why = control::text_of(m->body); why && *why == not_leading) not_yet = true;
    if ((lost || not_yet) && running && !standbys.empty()) {
      if (lost)
        std::fprintf(stderr,
                     "cohort: the coordinator this process waited at to join is gone (%s); asking the job's other "
                     "processes where it goes on\n",
                     m.error().message.c_str());
      else
        std::this_thread::sleep_for(milliseconds(200));
      auto again = ask_again(o, hello, standbys, give_up);
      if (!again) return make_error(again.error().code, "control: waiting to join: " + again.error().message);
      coordinator_host = again->host;
      *s = std::move(again->socket);
      continue;
    }
    break;
  }
  if (!m) return make_error(m.error().code, "control: waiting for the roster: " + m.error().message);
  auto body = control::text_of(m->body);
  if (!body) return body.error();
  if (control::is(m->tag, kind::refuse))
    return make_error(*body == not_needed ? errc::closed : errc::invalid_argument,
                      "control: the coordinator refused this node: " + *body);
  if (!control::is(m->tag, kind::roster)) return make_error(errc::io_error, "control: expected the roster");
  auto r = control::parse_roster(*body);  // the job's slots: more than it started with where it may grow
  if (!r) return r.error();
  const int world = static_cast<int>(r->size());
  const int me = static_cast<int>(control::key_of(m->tag));
  if (me < 1 || me >= world || (*r)[static_cast<std::size_t>(me)].pid != ::getpid())
    return make_error(errc::io_error, "control: the roster does not name this process");
  // the membership it joins: who is live, the replacements and joins so far
  auto st = control::read_message(*s, o.generation, control::small_payload, o.join_timeout);
  if (!st) return make_error(st.error().code, "control: waiting for the job's membership: " + st.error().message);
  auto text = control::text_of(st->body);
  if (!text) return text.error();
  if (!control::is(st->tag, kind::admitted))
    return make_error(errc::io_error, "control: expected the job's membership");
  auto joined = control::parse_membership(*text, world);
  if (!joined) return joined.error();
  const membership& mb = *joined;
  arrival how = arrival::start;
  if (!mb.replaced.empty() && mb.replaced.back() == me)
    how = arrival::replacement;
  else if (std::find(mb.joined.begin(), mb.joined.end(), me) != mb.joined.end())
    how = arrival::join;
  const bool fits = mb.live[static_cast<std::size_t>(me)] && (mb.epoch > 0) == (how != arrival::start) &&
                    (!o.replacement || how == arrival::replacement) && (!running || how != arrival::start);
  if (!fits) return make_error(errc::io_error, "control: a membership that does not fit this node: '" + *text + "'");
  control_options mine = o;
  mine.world = world;
  std::unique_ptr<control_plane> cp(new control_plane(mine, me));
  cp->epoch_ = mb.epoch;
  cp->live_ = mb.live;
  cp->replaced_ = mb.replaced;
  cp->joined_ = mb.joined;
  cp->arrived_ = how;
  if (how == arrival::replacement) cp->last_change_ = "process " + std::to_string(me) + " replaced";
  if (how == arrival::join) cp->last_change_ = "process " + std::to_string(me) + " joined";
  // the coordinator is where we reached it: process 0, or the process that took over from it
  const auto lead = static_cast<std::size_t>(mb.leader);
  cp->leader_ = mb.leader;
  cp->roster_ = std::move(*r);
  cp->roster_[lead].host = coordinator_host;
  cp->standby_ = std::move(standby);
  auto p = std::make_unique<peer>();
  p->address = s->peer_name();
  p->pid = cp->roster_[lead].pid;
  p->socket = std::move(*s);
  cp->peers_[lead] = std::move(p);
  cp->start_monitor();
  return cp;
}

}  // namespace cohort::transport
