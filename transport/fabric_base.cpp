// The shared part of the fabrics between processes: routing, local sends, closing, offered
// landing buffers.
#include "transport/fabric_base.hpp"

#include <stdexcept>

namespace cohort::transport {

fabric_base::fabric_base(std::string name, std::vector<int> process_of_rank, int process)
    : name_(std::move(name)), process_of_rank_(std::move(process_of_rank)), process_(process) {
  for (int r = 0; r < size(); ++r) boxes_.push_back(is_local(r) ? std::make_unique<mailbox>() : nullptr);
}

fabric_base::~fabric_base() = default;

channel& fabric_base::endpoint(int rank) {
  if (!is_local(rank))
    throw std::invalid_argument(name_ + ": rank " + std::to_string(rank) + " is not in this process");
  return *endpoints_[static_cast<std::size_t>(rank)];
}

void fabric_base::close(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_why_.empty()) return;
    closed_why_ = why.empty() ? "closed" : why;
  }
  for (auto& b : boxes_)
    if (b) b->close(why);
  on_close();
}

std::string fabric_base::closed_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_why_;
}

bool fabric_base::is_closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !closed_why_.empty();
}

std::string fabric_base::route_problem(const frame_meta& m, int p) const {
  if (process_of(static_cast<int>(m.source)) != p)
    return "source rank " + std::to_string(m.source) + " does not live in process " + std::to_string(p);
  return "destination rank " + std::to_string(m.destination) + " does not live in this process";
}

status fabric_base::send_local(int from, int to, std::uint64_t tag, tensor t) {
  if (!box(to).put(from, tag, std::move(t)))
    return make_error(errc::closed, "send: channel closed: " + closed_reason());
  return {};
}

result<tensor> fabric_base::recv_local(int me, int from, std::uint64_t tag, milliseconds timeout) {
  return box(me).take(from, tag, timeout, me);
}

// --- offered landing buffers

// Offered under the site's lock, so no frame is matched against the posting half made: the
// message is either in the mailbox already, arriving into a buffer of its own, or not begun.
std::optional<tensor> fabric_base::offer(int me, int from, std::uint64_t tag, const tensor& landing) {
  landing_site& site = landing_site_of(from);
  std::lock_guard<std::mutex> lock(site.lock());
  if (auto t = box(me).try_take(from, tag)) return t;  // it came before we asked
  if (!site.arriving(me, from, tag)) site.posted().post(me, from, tag, landing);
  return std::nullopt;
}

result<tensor> fabric_base::wait_offered(int me, int from, std::uint64_t tag, milliseconds timeout) {
  auto got = recv_remote(me, from, tag, timeout);
  landing_site& site = landing_site_of(from);
  posted_receives::state s;
  bool detached;
  {
    std::lock_guard<std::mutex> lock(site.lock());
    detached = site.detach(me);  // a payload still arriving goes on into a buffer of its own
    s = site.posted().withdraw(me);
  }
  if (got) return got;
  if (s == posted_receives::state::landed)  // it landed just as the wait ended
    if (auto t = box(me).try_take(from, tag)) return std::move(*t);
  if (s == posted_receives::state::landing && !detached)  // the payload goes on into our buffer: end the fabric
    close("rank " + std::to_string(me) + " stopped waiting for rank " + std::to_string(from) +
          " while its payload arrived: " + got.error().message);
  return got;
}

result<tensor> fabric_base::recv_landing_remote(int me, int from, std::uint64_t tag, const tensor& landing,
                                                milliseconds timeout) {
  if (auto early = offer(me, from, tag, landing)) return std::move(*early);
  return wait_offered(me, from, tag, timeout);
}

status fabric_base::check_landing(int me, int from, const tensor& landing) const {
  if (!is_local(me))
    return make_error(errc::invalid_argument, name_ + ": rank " + std::to_string(me) + " is not in this process");
  if (from < 0 || from >= size() || is_local(from))
    return make_error(errc::invalid_argument,
                      name_ + ": rank " + std::to_string(from) + " is not a rank of another process");
  if (!landing.is_contiguous())
    return make_error(errc::invalid_argument, name_ + ": a landing buffer must be contiguous");
  return {};
}

result<std::optional<tensor>> fabric_base::offer_landing(int me, int from, std::uint64_t tag, const tensor& landing) {
  if (auto st = check_landing(me, from, landing); !st) return st.error();
  return offer(me, from, tag, landing);
}

result<tensor> fabric_base::wait_landing(int me, int from, std::uint64_t tag, milliseconds timeout) {
  if (auto st = check_landing(me, from, tensor::empty(shape{0})); !st) return st.error();
  return wait_offered(me, from, tag, timeout);
}

// --- endpoints

status fabric_base::local_endpoint::send(int peer, std::uint64_t tag, tensor t, milliseconds timeout) {
  if (auto st = check_peer(peer, /*sending=*/true); !st) return st;
  if (f_.is_local(peer)) return f_.send_local(rank_, peer, tag, std::move(t));
  const auto bytes = static_cast<std::uint64_t>(t.numel()) * size_of(t.type());
  auto st = f_.send_remote(rank_, peer, tag, std::move(t), timeout);
  if (st) f_.remote_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return st;
}

result<tensor> fabric_base::local_endpoint::recv(int peer, std::uint64_t tag, milliseconds timeout) {
  if (auto st = check_peer(peer, /*sending=*/false); !st) return st.error();
  if (f_.is_local(peer)) return f_.recv_local(rank_, peer, tag, timeout);
  return f_.recv_remote(rank_, peer, tag, timeout);
}

// Posts `landing` where the message will come from, so that its payload is received straight into it.
result<tensor> fabric_base::local_endpoint::recv_landing(int peer, std::uint64_t tag, const tensor& landing,
                                                         milliseconds timeout) {
  if (auto st = check_peer(peer, /*sending=*/false); !st) return st.error();
  if (f_.is_local(peer) || !landing.is_contiguous()) return recv(peer, tag, timeout);
  return f_.recv_landing_remote(rank_, peer, tag, landing, timeout);
}

}  // namespace cohort::transport
