// An in-process channel: N ranks in one process (threads or actors) exchange tensors
// through per-rank mailboxes. A send moves the tensor into the receiver's mailbox without
// copying its data; close() wakes every waiter with errc::closed (used on shutdown and to
// abort a step whose peer died).
//
//   in_process_fabric fabric(2);
//   std::thread t([&] { fabric.endpoint(1).send(0, 3, tensor::full({4}, 1.f), 1s); });
//   auto r = fabric.endpoint(0).recv(1, 3, 1s);   // the same storage the sender made
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "transport/channel.hpp"

namespace cohort::transport {

class in_process_fabric {
 public:
  explicit in_process_fabric(int ranks);
  ~in_process_fabric();
  in_process_fabric(const in_process_fabric&) = delete;
  in_process_fabric& operator=(const in_process_fabric&) = delete;

  int size() const { return static_cast<int>(endpoints_.size()); }
  channel& endpoint(int rank);
  /// Wakes all waiters with errc::closed; later sends and receives fail the same way.
  void close();

 private:
  struct mailbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<std::pair<int, std::uint64_t>, std::deque<tensor>> queues;  // (from, tag)
    bool closed = false;
  };
  class endpoint_impl;
  std::vector<std::unique_ptr<mailbox>> mailboxes_;
  std::vector<std::unique_ptr<endpoint_impl>> endpoints_;
};

}  // namespace cohort::transport
