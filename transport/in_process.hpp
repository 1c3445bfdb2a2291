// An in-process fabric: N ranks in one process (threads or actors) exchange tensors through
// per-rank mailboxes. A send moves the tensor into the receiver's mailbox without copying
// its data; close() wakes every waiter with errc::closed (used on shutdown and to abort a
// step whose peer died).
//
//   in_process_fabric fabric(2);
//   tensor t = tensor::full({4}, 1.f);
//   std::thread sender([&] { status st = fabric.endpoint(1).send(0, /*tag=*/3, t, 1s); });
//   auto r = fabric.endpoint(0).recv(1, 3, 1s);   // the same storage the sender made
//   sender.join();
//   assert(r && r->shares_storage_with(t));
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/fabric.hpp"
#include "transport/mailbox.hpp"

namespace cohort::transport {

class in_process_fabric : public fabric {
 public:
  explicit in_process_fabric(int ranks);
  ~in_process_fabric() override;
  in_process_fabric(const in_process_fabric&) = delete;
  in_process_fabric& operator=(const in_process_fabric&) = delete;

  int size() const override { return static_cast<int>(endpoints_.size()); }
  bool is_local(int rank) const override { return rank >= 0 && rank < size(); }
  channel& endpoint(int rank) override;
  void close(const std::string& why = {}) override;
  std::string closed_reason() const override;

 private:
  class endpoint_impl;
  std::vector<std::unique_ptr<mailbox>> mailboxes_;
  std::vector<std::unique_ptr<endpoint_impl>> endpoints_;
  mutable std::mutex mutex_;
  std::string closed_why_;
};

}  // namespace cohort::transport
