// Mailboxes guarded by a mutex and a condition variable per receiving rank.
#include "transport/in_process.hpp"

#include <string>

namespace cohort::transport {

class in_process_fabric::endpoint_impl : public channel {
 public:
  endpoint_impl(in_process_fabric& f, int rank) : fabric_(f), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return fabric_.size(); }

  status send(int peer, std::uint64_t tag, tensor t, milliseconds) override {
    if (peer < 0 || peer >= size())
      return make_error(errc::invalid_argument, "send: rank " + std::to_string(rank_) + " to nonexistent peer " + std::to_string(peer));
    mailbox& box = *fabric_.mailboxes_[static_cast<std::size_t>(peer)];
    {
      std::lock_guard<std::mutex> lock(box.mutex);
      if (box.closed) return make_error(errc::closed, "send: channel closed");
      box.queues[{rank_, tag}].push_back(std::move(t));
    }
    box.arrived.notify_all();
    return {};
  }

  result<tensor> recv(int peer, std::uint64_t tag, milliseconds timeout) override {
    if (peer < 0 || peer >= size())
      return make_error(errc::invalid_argument, "recv: rank " + std::to_string(rank_) + " from nonexistent peer " + std::to_string(peer));
    mailbox& box = *fabric_.mailboxes_[static_cast<std::size_t>(rank_)];
    std::unique_lock<std::mutex> lock(box.mutex);
    auto key = std::make_pair(peer, tag);
    bool ready = box.arrived.wait_for(lock, timeout, [&] {
      if (box.closed) return true;
      auto it = box.queues.find(key);
      return it != box.queues.end() && !it->second.empty();
    });
    if (box.closed) return make_error(errc::closed, "recv: channel closed");
    if (!ready)
      return make_error(errc::timeout, "recv: rank " + std::to_string(rank_) + " waited " +
                                           std::to_string(timeout.count()) + " ms for rank " +
                                           std::to_string(peer) + " (tag " + std::to_string(tag) + ")");
    auto it = box.queues.find(key);
    tensor t = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) box.queues.erase(it);
    return t;
  }

 private:
  in_process_fabric& fabric_;
  int rank_;
};

in_process_fabric::in_process_fabric(int ranks) {
  for (int r = 0; r < ranks; ++r) {
    mailboxes_.push_back(std::make_unique<mailbox>());
    endpoints_.push_back(std::make_unique<endpoint_impl>(*this, r));
  }
}

in_process_fabric::~in_process_fabric() = default;

channel& in_process_fabric::endpoint(int rank) { return *endpoints_.at(static_cast<std::size_t>(rank)); }

void in_process_fabric::close() {
  for (auto& box : mailboxes_) {
    {
      std::lock_guard<std::mutex> lock(box->mutex);
      box->closed = true;
    }
    box->arrived.notify_all();
  }
}

}  // namespace cohort::transport
