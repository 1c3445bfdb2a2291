// In-process endpoints: a send puts the tensor into the receiver's mailbox.
#include "transport/in_process.hpp"

#include <string>

namespace cohort::transport {

class in_process_fabric::endpoint_impl : public channel {
 public:
  endpoint_impl(in_process_fabric& f, int rank) : fabric_(f), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return fabric_.size(); }

  status send(int peer, std::uint64_t tag, tensor t, milliseconds) override {
    if (auto st = check_peer(peer, /*sending=*/true); !st) return st;
    if (!fabric_.mailboxes_[static_cast<std::size_t>(peer)]->put(rank_, tag, std::move(t))) {
      const std::string why = fabric_.closed_reason();
      return make_error(errc::closed, "send: channel closed" + (why.empty() ? std::string() : ": " + why));
    }
    return {};
  }

  result<tensor> recv(int peer, std::uint64_t tag, milliseconds timeout) override {
    if (auto st = check_peer(peer, /*sending=*/false); !st) return st.error();
    return fabric_.mailboxes_[static_cast<std::size_t>(rank_)]->take(peer, tag, timeout, rank_);
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

void in_process_fabric::close(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_why_.empty()) closed_why_ = why.empty() ? "closed" : why;
  }
  for (auto& box : mailboxes_) box->close(why);
}

std::string in_process_fabric::closed_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_why_;
}

}  // namespace cohort::transport
