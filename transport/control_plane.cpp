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
}

control_plane::~control_plane() {
  stopping_ = true;
  if (monitor_.joinable()) monitor_.join();
}

status control_plane::send(int p, std::uint64_t tag, const tensor& body) {
  auto& pe = peers_.at(static_cast<std::size_t>(p));
  if (!pe) return make_error(errc::invalid_argument, "control: no connection to process " + std::to_string(p));
  std::lock_guard<std::mutex> lock(pe->write);
  return control::write_message(pe->socket, o_.generation, tag, static_cast<std::uint32_t>(process_), body,
                                std::max(o_.heartbeat_timeout, milliseconds(1000)));
}

result<control_plane::message> control_plane::take(int p, std::uint64_t tag, milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto key = std::make_pair(p, tag);
  auto ready = [&] {
    auto it = inbox_.find(key);
    return it != inbox_.end() && !it->second.empty();
  };
  changed_.wait_for(lock, timeout, [&] { return ready() || lost_.has_value(); });
  if (!ready()) {
    if (lost_)
      return make_error(errc::closed, "control: " + (lost_->process == -1 ? lost_->reason : lost_->describe()));
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
