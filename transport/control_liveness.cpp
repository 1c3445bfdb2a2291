// The control plane's liveness: the monitor thread reads every control connection (putting
// collective messages in the inbox), sends heartbeats, and declares a node lost when its
// connection closes without a goodbye or stays silent past the heartbeat timeout; the
// coordinator then tells the others to abort. The loss report, the on_lost callback, and the
// orderly goodbye (finish) that keeps closing connections from being losses.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "transport/control_codec.hpp"
#include "transport/control_peer.hpp"
#include "transport/control_plane.hpp"

namespace cohort::transport {

using control::kind;
using control::tag_of;
using clock = std::chrono::steady_clock;

namespace {

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

tensor empty_body() { return tensor::empty(shape{0}, dtype::i32); }

}  // namespace

std::string lost_node::describe() const {
  if (process < 0) return reason;  // relayed by the coordinator, which named the node
  char buf[160];
  std::snprintf(buf, sizeof buf, "; last heard from it %.2f s before", silent_s);
  std::string who = coordinator ? "lost the coordinator (process " + std::to_string(process) + ", "
                                : "lost node " + std::to_string(process) + " (";
  return who + "pid " + std::to_string(pid) + " at " + address + ") at step " + std::to_string(step) + ": " + reason +
         buf;
}

void control_plane::start_monitor() {
  monitor_ = std::thread([this] { monitor(); });
}

void control_plane::admit_at_standby() {
  if (!standby_ || admitter_.joinable()) return;
  listener_ = std::move(standby_);
  standby_.reset();
  admitting_ = true;
  admitter_ = std::thread([this] { admit_loop(); });
}

void control_plane::monitor() {
  auto last_beat = clock::time_point{};
  while (!stopping_) {
    if (listener_) install_admissions();  // replacements the admitter let in
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int p = 0; p < o_.world; ++p) {
      auto& pe = peers_[static_cast<std::size_t>(p)];
      if (pe && pe->open) {
        fds.push_back({pe->socket.fd(), POLLIN, 0});
        who.push_back(p);
      }
    }
    if (fds.empty()) {  // nobody left to hear; a coordinator admitting replacements waits for one
      if (!listener_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    ::poll(fds.data(), fds.size(), 50);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int p = who[i];
      auto& pe = *peers_[static_cast<std::size_t>(p)];
      auto m = control::read_message(pe.socket, o_.generation, control::small_payload, o_.heartbeat_timeout);
      if (!m) {
        pe.open = false;
        if (stopping_ || pe.said_bye) continue;
        declare_lost(p, m.error().code == errc::closed
                            ? "connection closed without a goodbye (the process died or was killed)"
                            : m.error().message);
        continue;
      }
      pe.last_heard = clock::now();
      handle_frame(p, m->tag, {m->source, std::move(m->body)});
    }
    const auto now = clock::now();
    if (now - last_beat >= o_.heartbeat) {
      last_beat = now;
      for (int p = 0; p < o_.world; ++p) {
        auto& pe = peers_[static_cast<std::size_t>(p)];
        if (!pe || !pe->open || pe->said_bye) continue;
        if (now - pe->last_heard > o_.heartbeat_timeout) {
          // something waiting to be read is not silence (this process may itself have been
          // stopped, e.g. a node that wakes to find it was fenced out): read it first
          pollfd waiting{pe->socket.fd(), POLLIN, 0};
          if (::poll(&waiting, 1, 0) > 0 && waiting.revents != 0) continue;
          pe->open = false;
          declare_lost(p,
                       "no heartbeat for " + std::to_string(o_.heartbeat_timeout.count()) +
                           " ms (the process is stopped, hung or unreachable)",
                       /*silent=*/true);
          continue;
        }
        if (auto st = send(p, tag_of(kind::heartbeat), empty_body()); !st && !pe->said_bye) {
          pe->open = false;
          declare_lost(p, "heartbeat not delivered: " + st.error().message, st.error().code == errc::timeout);
        }
      }
    }
  }
}

void control_plane::handle_frame(int p, std::uint64_t tag, message m) {
  auto& pe = *peers_[static_cast<std::size_t>(p)];
  switch (static_cast<kind>(control::kind_code(tag))) {
    case kind::heartbeat:
      return;
    case kind::bye: {
      bool departed = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);  // finish() waits on changed_ for it
        pe.said_bye = true;
        departed = is_leader() && std::find(departed_.begin(), departed_.end(), p) != departed_.end();
      }
      if (departed) (void)send(p, tag_of(kind::bye), empty_body());  // it left: its goodbye answered now
      changed_.notify_all();
      return;
    }
    case kind::departed: {  // from the coordinator: "EPOCH PROCESS", PROCESS left the job in good order
      auto text = control::text_of(m.body);
      std::uint64_t epoch = 0;
      int gone = -1;
      if (p != leader() || !text || std::sscanf(text->c_str(), "%lu %d", &epoch, &gone) != 2 || gone < 0 ||
          gone >= o_.world || gone == process_ || gone == p) {
        pe.open = false;
        declare_lost(p, "protocol violation: a malformed departure");
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (lost_ || epoch != epoch_ + 1 || !live_[static_cast<std::size_t>(gone)]) return;
        live_[static_cast<std::size_t>(gone)] = false;
        departed_.push_back(gone);
        last_change_ = "process " + std::to_string(gone) + " left";
        epoch_ = epoch;
      }
      changed_.notify_all();
      return;
    }
    case kind::membership: {  // from the coordinator: "EPOCH PROCESS REASON", the job goes on without PROCESS
      auto text = control::text_of(m.body);
      std::uint64_t epoch = 0;
      int gone = -1, used = 0;
      if (p != leader() || !text || std::sscanf(text->c_str(), "%lu %d %n", &epoch, &gone, &used) < 2 || gone < 0 ||
          gone >= o_.world || gone == process_ || gone == p) {
        pe.open = false;
        declare_lost(p, "protocol violation: a malformed membership change");
        return;
      }
      lost_node n;
      std::function<void(const lost_node&)> callback;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (lost_ || epoch != epoch_ + 1 || !live_[static_cast<std::size_t>(gone)]) return;
        live_[static_cast<std::size_t>(gone)] = false;
        lost_processes_.push_back(gone);
        last_change_ = "process " + std::to_string(gone) + " lost";
        epoch_ = epoch;
        n.process = -1;  // named by the coordinator's report
        n.reason = text->substr(static_cast<std::size_t>(used));
        n.step = step_;
        n.epoch = epoch;
        losses_.push_back(n);
        callback = on_lost_;
        ++telling_;
      }
      if (callback) callback(n);  // before the waiters wake: wait_membership returns after on_lost ran
      told_lost();
      return;
    }
    case kind::joined: {  // from the coordinator: processes took lost or empty slots (control::joined_text)
      auto text = control::text_of(m.body);
      auto batch = p == leader() && text ? control::parse_joined(*text, o_.world)
                                         : result<std::pair<std::uint64_t, std::vector<control::joined_entry>>>(
                                               make_error(errc::io_error, "not from the coordinator"));
      bool fits = batch.ok();
      for (std::size_t i = 0; fits && i < batch->second.size(); ++i) fits = batch->second[i].node.process != process_;
      if (!fits) {
        pe.open = false;
        declare_lost(p, "protocol violation: a malformed admission");
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (lost_ || batch->first != epoch_ + 1) return;
        for (const auto& j : batch->second)
          if (live_[static_cast<std::size_t>(j.node.process)]) return;
        std::string who;
        for (const auto& j : batch->second) {
          const int q = j.node.process;
          roster_[static_cast<std::size_t>(q)] = j.node;
          live_[static_cast<std::size_t>(q)] = true;
          (j.replacement ? replaced_ : joined_).push_back(q);
          who += (who.empty() ? "process " : ", process ") + std::to_string(q);
        }
        last_change_ = batch->second.empty()               ? "nobody admitted"
                       : batch->second.front().replacement ? who + " replaced"
                                                           : who + " joined";
        epoch_ = batch->first;
      }
      changed_.notify_all();
      return;
    }
    case kind::fenced: {  // from the coordinator: this process was declared lost, the job went on
      auto why = control::text_of(m.body);
      lost_node n;
      std::function<void(const lost_node&)> callback;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (lost_) return;
        n.process = -1;
        n.reason = "fenced out of the job: " + (why ? *why : std::string("the coordinator declared this process lost"));
        n.step = step_;
        lost_ = n;
        callback = on_lost_;
      }
      changed_.notify_all();
      if (callback) callback(n);
      return;
    }
    case kind::abort_job: {  // from the coordinator: another node was lost
      auto why = control::text_of(m.body);
      lost_node n;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (lost_) return;
        n.process = -1;
        n.reason = why ? *why : "the coordinator aborted the job";
        n.step = step_;
        lost_ = n;
      }
      changed_.notify_all();
      if (on_lost_) on_lost_(n);
      return;
    }
    case kind::text:
    case kind::sum_part:
    case kind::sum_total:
    case kind::piece: {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        inbox_[{p, tag}].push_back(std::move(m));
      }
      changed_.notify_all();
      return;
    }
    default:
      pe.open = false;
      declare_lost(p, "protocol violation: unexpected control message kind " + std::to_string(control::kind_code(tag)));
  }
}

void control_plane::declare_lost(int p, const std::string& reason, bool silent) {
  lost_node n;
  std::function<void(const lost_node&)> callback;
  const int lead = leader();
  bool goes_on = o_.keep_going && process_ == lead && p != lead;
  std::uint64_t epoch = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_ || !live_[static_cast<std::size_t>(p)]) return;
    const auto& pe = *peers_[static_cast<std::size_t>(p)];
    n.process = p;
    n.address = pe.address;
    n.pid = pe.pid;
    n.step = step_;
    n.reason = reason;
    n.silent_s = seconds(clock::now() - pe.last_heard);
    n.coordinator = p == lead;
    if (goes_on && o_.succession && silent && lost_the_majority_locked()) {
      goes_on = false;  // the others may follow a successor: this side must not go on too
      n.reason +=
          "; this coordinator lost touch with more than half of its processes at once, so it ends rather "
          "than lead a minority (the others may go on under a successor)";
    }
    if (goes_on) {
      live_[static_cast<std::size_t>(p)] = false;
      lost_processes_.push_back(p);
      last_change_ = "process " + std::to_string(p) + " lost";
      epoch = ++epoch_;
      n.epoch = epoch;
      losses_.push_back(n);
      ++telling_;  // lowered once on_lost ran (below)
    } else if (!(n.coordinator && o_.keep_going && o_.succession)) {
      lost_ = n;
    }
    callback = on_lost_;
  }
  if (!goes_on && n.coordinator && o_.keep_going && o_.succession) {
    if (succeed(n)) return;  // a successor leads the job on (it told on_lost and the waiters)
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (lost_) return;
      lost_ = n;
    }
  }
  if (!goes_on) changed_.notify_all();
  if (goes_on) {
    // fence it out: it hears so if it still can, and nothing it sends is read again
    auto& pe = *peers_[static_cast<std::size_t>(p)];
    (void)send(p, tag_of(kind::fenced), control::pack_text("the coordinator declared it lost: " + n.describe()));
    pe.socket.shutdown();
    const auto now = members().live;
    for (int q = 0; q < o_.world; ++q) {
      auto& other = peers_[static_cast<std::size_t>(q)];
      if (q != p && q != process_ && other && other->open && now[static_cast<std::size_t>(q)])
        (void)send(q, tag_of(kind::membership),
                   control::pack_text(std::to_string(epoch) + " " + std::to_string(p) + " " + n.describe()));
    }
    if (callback) callback(n);
    told_lost();  // after on_lost ran, as on the nodes
    return;
  }
  if (is_leader())  // tell the others, so they stop instead of waiting on the lost one
    for (int q = 0; q < o_.world; ++q)
      if (q != p && q != process_ && peers_[static_cast<std::size_t>(q)] && peers_[static_cast<std::size_t>(q)]->open)
        (void)send(q, tag_of(kind::abort_job), control::pack_text("the coordinator aborted the job: " + n.describe()));
  if (callback) callback(n);
}

bool control_plane::lost_the_majority_locked() {
  // silent losses within one heartbeat timeout of each other are one burst: a partition cuts
  // the coordinator off from the other side's processes at once, and they go silent together
  // (a connection closed by its process's end is no partition: it does not count)
  const auto now = clock::now();
  int live = 0;
  for (bool l : live_) live += l ? 1 : 0;
  if (burst_base_ == 0 || now - burst_at_ > o_.heartbeat_timeout) burst_base_ = live;
  burst_at_ = now;
  const int left = live - 1;  // without p
  return burst_base_ >= 3 && 2 * left < burst_base_;
}

status control_plane::depart(int p) {
  if (!is_leader()) return make_error(errc::invalid_argument, "control: only the coordinator lets a node leave");
  std::uint64_t epoch = 0;
  bool said_bye = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_) return make_error(errc::closed, lost_->describe());
    if (!o_.keep_going || p < 0 || p >= o_.world || p == process_ || !live_[static_cast<std::size_t>(p)])
      return make_error(errc::invalid_argument, "control: process " + std::to_string(p) + " cannot leave the job");
    live_[static_cast<std::size_t>(p)] = false;
    departed_.push_back(p);
    last_change_ = "process " + std::to_string(p) + " left";
    epoch = ++epoch_;
    said_bye = peers_[static_cast<std::size_t>(p)] && peers_[static_cast<std::size_t>(p)]->said_bye;
  }
  // its goodbye came before it was let go (it moved on first): answered now, or it waits
  if (said_bye) (void)send(p, tag_of(kind::bye), empty_body());
  const auto now = members();
  for (int q = 0; q < o_.world; ++q)
    if (q != process_ && now.live[static_cast<std::size_t>(q)])
      (void)send(q, tag_of(kind::departed), control::pack_text(std::to_string(epoch) + " " + std::to_string(p)));
  changed_.notify_all();
  return {};
}

void control_plane::on_lost(std::function<void(const lost_node&)> fn) {
  std::optional<lost_node> already;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    on_lost_ = fn;
    already = lost_;
  }
  if (already && fn) fn(*already);
}

std::optional<lost_node> control_plane::lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

std::optional<lost_node> control_plane::last_loss() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (losses_.empty()) return std::nullopt;
  return losses_.back();
}

std::vector<lost_node> control_plane::losses_after(std::uint64_t epoch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<lost_node> out;
  for (const auto& n : losses_)
    if (n.epoch > epoch) out.push_back(n);
  return out;
}

std::optional<lost_node> control_plane::wait_lost(milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return lost_.has_value(); });
  return lost_;
}

status control_plane::finish(milliseconds timeout) {
  if (auto l = lost(); l) return make_error(errc::closed, l->describe());
  if (!is_leader()) {
    const int lead = leader();
    if (auto st = send(lead, tag_of(kind::bye), empty_body()); !st) return st;
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout,
                      [&] { return peers_[static_cast<std::size_t>(lead)]->said_bye || lost_.has_value(); });
  } else {
    auto all_left = [&] {
      for (int p = 0; p < o_.world; ++p)
        if (p != process_ && is_live(p) && !peers_[static_cast<std::size_t>(p)]->said_bye) return false;
      return true;
    };
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait_for(lock, timeout, [&] { return all_left() || lost_.has_value(); });
    }
    const auto now = members();
    for (int p = 0; p < o_.world; ++p)
      if (p != process_ && now.live[static_cast<std::size_t>(p)]) (void)send(p, tag_of(kind::bye), empty_body());
  }
  stopping_ = true;
  if (monitor_.joinable()) monitor_.join();
  if (is_leader()) dismiss_waiting();  // spares that were never needed
  if (auto l = lost(); l) return make_error(errc::closed, l->describe());
  return {};
}

}  // namespace cohort::transport
