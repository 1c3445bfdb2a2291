// One rank's incoming messages, matched by (sender, tag), in arrival order per key. Shared
// by the in-process and the TCP fabrics: local sends put here directly, the TCP fabric's
// reader threads put what arrives from other processes.
//
//   mailbox box;
//   tensor t = tensor::full({4}, 1.f);
//   box.put(/*from=*/1, /*tag=*/7, t);
//   result<tensor> r = box.take(1, 7, 2s, /*me=*/0);   // errc::timeout / errc::closed
//   std::optional<tensor> none = box.try_take(1, 7);   // nothing more from rank 1 under tag 7
//   box.close("shutting down");                        // wakes every waiting take()
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "graph/error.hpp"
#include "graph/tensor.hpp"

namespace cohort::transport {

class mailbox {
 public:
  /// False when the mailbox is closed (the message is dropped).
  bool put(int from, std::uint64_t tag, tensor t);
  /// The oldest message from `from` under `tag`; after close() only what had arrived.
  result<tensor> take(int from, std::uint64_t tag, std::chrono::milliseconds timeout, int me);
  /// Without waiting: the message if it is there.
  std::optional<tensor> try_take(int from, std::uint64_t tag);
  void close(const std::string& why);

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::pair<int, std::uint64_t>, std::deque<tensor>> queues_;
  bool closed_ = false;
  std::string why_;
};

}  // namespace cohort::transport
