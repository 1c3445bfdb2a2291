// Mailbox: a mutex, a condition variable and a queue per (sender, tag).
#include "transport/mailbox.hpp"

namespace cohort::transport {

bool mailbox::put(int from, std::uint64_t tag, tensor t) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return false;
    queues_[{from, tag}].push_back(std::move(t));
  }
  arrived_.notify_all();
  return true;
}

result<tensor> mailbox::take(int from, std::uint64_t tag, std::chrono::milliseconds timeout, int me) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto key = std::make_pair(from, tag);
  auto available = [&] {
    auto it = queues_.find(key);
    return it != queues_.end() && !it->second.empty();
  };
  // What arrived before a close is still delivered: a peer may send its last message and exit.
  const bool ready = arrived_.wait_for(lock, timeout, [&] { return closed_ || available(); });
  if (!available() && closed_)
    return make_error(errc::closed, "recv: channel closed" + (why_.empty() ? std::string() : ": " + why_));
  if (!ready)
    return make_error(errc::timeout, "recv: rank " + std::to_string(me) + " waited " + std::to_string(timeout.count()) +
                                         " ms for rank " + std::to_string(from) + " (tag " + std::to_string(tag) + ")");
  auto it = queues_.find(key);
  tensor t = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  return t;
}

std::optional<tensor> mailbox::try_take(int from, std::uint64_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = queues_.find({from, tag});
  if (it == queues_.end() || it->second.empty()) return std::nullopt;
  tensor t = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  return t;
}

void mailbox::close(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    closed_ = true;
    why_ = why;
  }
  arrived_.notify_all();
}

}  // namespace cohort::transport
