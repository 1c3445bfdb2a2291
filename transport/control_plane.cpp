// What the control plane's parts share: the peer connections, sending one message to a
// peer, and taking a message the monitor thread put in the inbox. The parts: the codec
// (control_codec.cpp), the rendezvous (control_rendezvous.cpp), liveness
// (control_liveness.cpp) and the small collectives (control_collectives.cpp).
#include "transport/control_plane.hpp"

#include <algorithm>

#include "transport/control_codec.hpp"
#include "transport/control_peer.hpp"

namespace cohort::transport {

control_plane::control_plane(const control_options& o, int process) : o_(o), process_(process) {
  peers_.resize(static_cast<std::size_t>(o.world));
  live_.assign(static_cast<std::size_t>(o.world), true);
}

std::uint64_t control_plane::epoch_key(std::uint64_t key, std::uint64_t epoch) {
  return (key & ((std::uint64_t{1} << 48) - 1)) | (epoch << 48);
}

result<std::uint64_t> control_plane::call_epoch(std::optional<std::uint64_t> wanted) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (wanted && *wanted != epoch_)
    return make_error(errc::closed,
                      "control: the job's membership changed (" + last_change_ + ") before this collective");
  return epoch_;
}

bool control_plane::is_live(int p) const { return p >= 0 && p < o_.world && live_[static_cast<std::size_t>(p)]; }

membership control_plane::members() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {epoch_, live_, lost_processes_, replaced_, departed_, joined_, leader_.load()};
}

std::vector<node_entry> control_plane::roster() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return roster_;
}

result<membership> control_plane::wait_membership(std::uint64_t epoch, milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  // a loss's new epoch counts once its on_lost callback has run (the runtime's view of the
  // loss is then in place)
  changed_.wait_for(lock, timeout, [&] { return (epoch_ > epoch && telling_ == 0) || lost_.has_value(); });
  if (lost_) return make_error(errc::closed, lost_->describe());
  if (epoch_ <= epoch)
    return make_error(errc::timeout, "control: no membership change within " + std::to_string(timeout.count()) + " ms");
  return membership{epoch_, live_, lost_processes_, replaced_, departed_, joined_, leader_.load()};
}

void control_plane::told_lost() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --telling_;
  }
  changed_.notify_all();
}

control_plane::~control_plane() {
  stopping_ = true;
  // the monitor first: a successor's monitor may start the admitter (control_liveness.cpp)
  if (monitor_.joinable()) monitor_.join();
  if (admitter_.joinable()) admitter_.join();
  if (is_leader()) dismiss_waiting();
}

status control_plane::send(int p, std::uint64_t tag, const tensor& body) {
  auto& pe = peers_.at(static_cast<std::size_t>(p));
  if (!pe) return make_error(errc::invalid_argument, "control: no connection to process " + std::to_string(p));
  std::lock_guard<std::mutex> lock(pe->write);
  auto st = control::write_message(pe->socket, o_.generation, tag, static_cast<std::uint32_t>(process_), body,
                                   std::max(o_.heartbeat_timeout, milliseconds(1000)));
  if (st)
    sent_bytes_.fetch_add(static_cast<std::uint64_t>(body.numel()) * size_of(body.type()), std::memory_order_relaxed);
  return st;
}

result<control_plane::message> control_plane::take(int p, std::uint64_t tag, milliseconds timeout,
                                                   std::uint64_t epoch) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto key = std::make_pair(p, tag);
  auto ready = [&] {
    auto it = inbox_.find(key);
    return it != inbox_.end() && !it->second.empty();
  };
  changed_.wait_for(lock, timeout, [&] { return ready() || lost_.has_value() || epoch_ != epoch || !is_live(p); });
  if (!ready()) {
    if (lost_)
      return make_error(errc::closed, "control: " + (lost_->process == -1 ? lost_->reason : lost_->describe()));
    if (epoch_ != epoch || !is_live(p))
      return make_error(errc::closed, "control: the job's membership changed (" + last_change_ + ") while process " +
                                          std::to_string(process_) + " waited for process " + std::to_string(p));
    return make_error(errc::timeout, "control: process " + std::to_string(process_) + " waited " +
                                         std::to_string(timeout.count()) + " ms for process " + std::to_string(p));
  }
  auto it = inbox_.find(key);
  message m = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) inbox_.erase(it);
  return m;
}

}  // namespace cohort::transport
