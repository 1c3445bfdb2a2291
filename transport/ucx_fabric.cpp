// UCX fabric: one worker, one progress thread, two tagged messages per tensor (a header, then
// the payload, received into the buffer a waiting rank posted when it posted one).
#include "transport/ucx_fabric.hpp"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <stdexcept>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "transport/mailbox.hpp"
#include "transport/posted_receives.hpp"
#include "transport/progress_handoff.hpp"
#include "transport/wire.hpp"

namespace cohort::transport {
namespace {

// UCX tag: kind (4 bits) | source process (20 bits) | sequence per destination (40 bits).
constexpr std::uint64_t header_kind = 1, payload_kind = 2;
constexpr std::uint64_t kind_mask = std::uint64_t{0xf} << 60;
constexpr std::size_t max_header_bytes = frame_header_bytes + frame_max_rank * 8;

std::uint64_t ucx_tag(std::uint64_t kind, int process, std::uint64_t seq) {
  return (kind << 60) | (static_cast<std::uint64_t>(process) << 40) | (seq & ((std::uint64_t{1} << 40) - 1));
}
int process_of_tag(std::uint64_t tag) { return static_cast<int>((tag >> 40) & 0xfffff); }

error ucx_error(const std::string& what, ucs_status_t st) {
  return {errc::io_error, "ucx: " + what + ": " + ucs_status_string(st)};
}

struct send_op {
  int process = 0;
  std::vector<std::byte> head;
  tensor body;                 // held until UCX is done with it
  std::size_t payload = 0;
  int pending = 0;             // UCX requests not yet complete (progress thread only)
  bool done = false;           // guarded by the fabric's send mutex
  ucs_status_t status = UCS_OK;
};

struct recv_op {
  int from = 0, to = 0;
  std::uint64_t tag = 0;
  tensor t;
  bool complete = false;
  ucs_status_t status = UCS_OK;
};

}  // namespace

struct ucx_fabric::impl {
  tcp_fabric_options o;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int efd = -1;
  std::string my_address;
  std::vector<ucp_ep_h> eps;
  std::vector<std::unique_ptr<mailbox>> boxes;
  std::vector<std::unique_ptr<channel>> endpoints;

  std::mutex send_mutex;
  std::condition_variable send_done;
  std::deque<std::shared_ptr<send_op>> queue;  // handed to the progress thread
  std::string closed_why;                      // guarded by send_mutex

  // Every UCX call happens under progress_mutex: by the progress thread, or by a rank that
  // waits for a message or a send (it drives progress itself for a while instead of
  // waiting for the progress thread to wake up: microseconds instead of a thread hand-off).
  std::mutex progress_mutex;
  progress_handoff drivers;      // ranks driving progress now, or the progress thread
  std::unique_ptr<posted_receives> posted;  // guarded by progress_mutex
  std::vector<std::uint64_t> next_seq;
  std::vector<std::deque<std::shared_ptr<recv_op>>> incoming;  // by source process, in order
  std::vector<std::shared_ptr<send_op>> in_flight;
  std::thread progress;
  std::atomic<bool> stopping{false};
  std::chrono::nanoseconds spin = std::chrono::microseconds(500);  // how long a waiting rank drives progress

  bool is_local(int rank) const {
    return rank >= 0 && rank < static_cast<int>(o.process_of_rank.size()) && o.process_of_rank[static_cast<std::size_t>(rank)] == o.process;
  }
  void close(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(send_mutex);
      if (!closed_why.empty()) return;
      closed_why = why.empty() ? "closed" : why;
    }
    send_done.notify_all();
    for (auto& b : boxes)
      if (b) b->close(why);
    if (worker) ucp_worker_signal(worker);
  }
  std::string reason() {
    std::lock_guard<std::mutex> lock(send_mutex);
    return closed_why;
  }

  status send(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout);
  result<tensor> recv(int me, int from, std::uint64_t tag, milliseconds timeout);
  bool progress_once();     // with progress_mutex held; true when something happened
  bool try_progress();      // progress_once() if nobody else is progressing
  void run();
  void post(const std::shared_ptr<send_op>& op);
  bool probe_headers();
  void deliver();
  void finish_op(send_op* op, ucs_status_t st);
  void shutdown();
};

namespace {

class ucx_endpoint : public channel {
 public:
  ucx_endpoint(ucx_fabric::impl& f, int rank) : f_(f), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(f_.o.process_of_rank.size()); }
  status send(int peer, std::uint64_t tag, tensor t, milliseconds timeout) override {
    if (auto st = check_peer(peer, /*sending=*/true); !st) return st;
    return f_.send(rank_, peer, tag, std::move(t), timeout);
  }
  bool send_copies(int peer) const override { return !f_.is_local(peer); }
  result<tensor> recv(int peer, std::uint64_t tag, milliseconds timeout) override {
    if (auto st = check_peer(peer, /*sending=*/false); !st) return st.error();
    return f_.recv(rank_, peer, tag, timeout);
  }
  // Posts `landing`: the payload of the message it waits for is received straight into it.
  result<tensor> recv_landing(int peer, std::uint64_t tag, const tensor& landing, milliseconds timeout) override {
    if (auto st = check_peer(peer, /*sending=*/false); !st) return st.error();
    if (f_.is_local(peer) || !landing.is_contiguous()) return recv(peer, tag, timeout);
    mailbox& box = *f_.boxes[static_cast<std::size_t>(rank_)];
    {
      std::lock_guard<std::mutex> lock(f_.progress_mutex);
      if (auto t = box.try_take(peer, tag)) return std::move(*t);  // it came before we asked
      // a message whose header came is arriving into a buffer of its own: offering ours then
      // would let the next one land there
      const auto& q = f_.incoming[static_cast<std::size_t>(f_.o.process_of_rank[static_cast<std::size_t>(peer)])];
      const bool arriving = std::any_of(q.begin(), q.end(), [&](const auto& op) { return op->to == rank_ && op->from == peer && op->tag == tag; });
      if (!arriving) f_.posted->post(rank_, peer, tag, landing);
    }
    auto got = f_.recv(rank_, peer, tag, timeout);
    posted_receives::state s;
    {
      std::lock_guard<std::mutex> lock(f_.progress_mutex);
      s = f_.posted->withdraw(rank_);
    }
    if (got) return got;
    if (s == posted_receives::state::landed)  // it landed just as the wait ended
      if (auto t = box.try_take(peer, tag)) return std::move(*t);
    if (s == posted_receives::state::landing)  // UCX cannot stop a matched receive: end the fabric
      f_.close("rank " + std::to_string(rank_) + " stopped waiting for rank " + std::to_string(peer) +
               " while its payload arrived: " + got.error().message);
    return got;
  }

 private:
  ucx_fabric::impl& f_;
  int rank_;
};

void on_send(void* request, ucs_status_t st, void* user) {
  auto* pair = static_cast<std::pair<ucx_fabric::impl*, send_op*>*>(user);
  pair->first->finish_op(pair->second, st);
  delete pair;
  ucp_request_free(request);
}

void on_recv(void* request, ucs_status_t st, const ucp_tag_recv_info_t*, void* user) {
  auto* op = static_cast<recv_op*>(user);
  op->complete = true;
  op->status = st;
  ucp_request_free(request);
}

}  // namespace

status ucx_fabric::impl::send(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout) {
  if (is_local(to)) {
    if (!boxes[static_cast<std::size_t>(to)]->put(from, tag, std::move(t)))
      return make_error(errc::closed, "send: channel closed: " + reason());
    return {};
  }
  auto op = std::make_shared<send_op>();
  op->process = o.process_of_rank[static_cast<std::size_t>(to)];
  op->body = t.is_contiguous() ? std::move(t) : t.contiguous();
  op->head = encode_frame_prefix({.generation = o.generation, .tag = tag, .source = static_cast<std::uint32_t>(from),
                                  .destination = static_cast<std::uint32_t>(to)},
                                 op->body);
  op->payload = static_cast<std::size_t>(op->body.numel()) * size_of(op->body.type());
  {
    std::lock_guard<std::mutex> lock(send_mutex);
    if (!closed_why.empty()) return make_error(errc::closed, "send: channel closed: " + closed_why);
    queue.push_back(op);
  }
  const auto spin_until = std::chrono::steady_clock::now() + spin;
  drivers.enter();
  bool sent = false;
  for (;;) {
    try_progress();
    {
      std::lock_guard<std::mutex> lock(send_mutex);
      sent = op->done;
      if (sent || !closed_why.empty()) break;
    }
    if (std::chrono::steady_clock::now() > spin_until) break;
  }
  drivers.leave(sent);
  if (!sent) ucp_worker_signal(worker);  // the progress thread takes over what is left
  std::unique_lock<std::mutex> lock(send_mutex);
  send_done.wait_for(lock, timeout, [&] { return op->done || !closed_why.empty(); });
  if (op->done && op->status != UCS_OK) return ucx_error("send to rank " + std::to_string(to), op->status);
  if (op->done) return {};
  if (!closed_why.empty()) return make_error(errc::closed, "send: channel closed: " + closed_why);
  return make_error(errc::timeout, "send: rank " + std::to_string(from) + " to rank " + std::to_string(to) + " not delivered in " +
                                       std::to_string(timeout.count()) + " ms");
}

result<tensor> ucx_fabric::impl::recv(int me, int from, std::uint64_t tag, milliseconds timeout) {
  mailbox& box = *boxes[static_cast<std::size_t>(me)];
  const auto spin_until = std::chrono::steady_clock::now() + std::min<std::chrono::nanoseconds>(spin, timeout);
  drivers.enter();
  do {
    if (auto t = box.try_take(from, tag)) {
      drivers.leave(/*satisfied=*/true);
      return std::move(*t);
    }
    if (!reason().empty()) break;
    try_progress();
  } while (std::chrono::steady_clock::now() < spin_until);
  drivers.leave(/*satisfied=*/false);
  ucp_worker_signal(worker);  // the progress thread takes over
  return box.take(from, tag, timeout, me);
}

bool ucx_fabric::impl::try_progress() {
  std::unique_lock<std::mutex> lock(progress_mutex, std::try_to_lock);
  if (!lock.owns_lock() || stopping) return false;
  return progress_once();
}

void ucx_fabric::impl::finish_op(send_op* op, ucs_status_t st) {
  if (st != UCS_OK) op->status = st;
  if (--op->pending > 0) return;
  {
    std::lock_guard<std::mutex> lock(send_mutex);
    op->done = true;
  }
  send_done.notify_all();
}

void ucx_fabric::impl::post(const std::shared_ptr<send_op>& op) {
  const std::uint64_t seq = next_seq[static_cast<std::size_t>(op->process)]++;
  ucp_ep_h ep = eps[static_cast<std::size_t>(op->process)];
  op->pending = op->payload > 0 ? 2 : 1;
  auto issue = [&](std::uint64_t kind, void* buf, std::size_t len) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = on_send;
    auto* pair = new std::pair<ucx_fabric::impl*, send_op*>(this, op.get());
    p.user_data = pair;
    ucs_status_ptr_t r = ucp_tag_send_nbx(ep, buf, len, ucx_tag(kind, o.process, seq), &p);
    if (r == nullptr) {  // done at once: no callback
      delete pair;
      finish_op(op.get(), UCS_OK);
    } else if (UCS_PTR_IS_ERR(r)) {
      delete pair;
      finish_op(op.get(), UCS_PTR_STATUS(r));
    }
  };
  in_flight.push_back(op);
  issue(header_kind, op->head.data(), op->head.size());
  if (op->payload > 0) issue(payload_kind, op->body.data<std::byte>(), op->payload);
}

// Receives every header that has arrived; validates it and posts the payload's receive.
bool ucx_fabric::impl::probe_headers() {
  bool any = false;
  const std::uint32_t ranks = static_cast<std::uint32_t>(o.process_of_rank.size());
  for (;;) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = ucp_tag_probe_nb(worker, header_kind << 60, kind_mask, 1, &info);
    if (msg == nullptr) return any;
    any = true;
    const int p = process_of_tag(info.sender_tag);
    std::byte head[max_header_bytes];
    const std::size_t len = info.length;
    std::string bad;
    if (len > max_header_bytes || len < frame_header_bytes) bad = "a header of " + std::to_string(len) + " bytes";
    if (p < 0 || p >= static_cast<int>(eps.size()) || p == o.process) bad = "a message from unknown process " + std::to_string(p);
    std::vector<std::byte> sink;  // an oversized header is still taken off the queue
    if (!bad.empty()) sink.resize(len);
    ucp_request_param_t rp{};
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker, bad.empty() ? static_cast<void*>(head) : sink.data(), len, msg, &rp);
    if (UCS_PTR_IS_ERR(r)) {
      close("ucx: receiving a header: " + std::string(ucs_status_string(UCS_PTR_STATUS(r))));
      return any;
    }
    if (r != nullptr) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(r);
    }
    if (!bad.empty()) {
      close("ucx data plane: " + bad);
      return any;
    }
    auto h = decode_frame_header(std::span<const std::byte>(head, len), {.ranks = ranks});
    result<shape> s = h ? decode_frame_shape(*h, std::span<const std::byte>(head + frame_header_bytes, len - frame_header_bytes))
                        : result<shape>(h.error());
    if (h && s) {
      if (h->meta.generation != o.generation) bad = "a frame of generation " + std::to_string(h->meta.generation);
      else if (o.process_of_rank[h->meta.source] != p) bad = "source rank " + std::to_string(h->meta.source) + " does not live in process " + std::to_string(p);
      else if (!is_local(static_cast<int>(h->meta.destination))) bad = "destination rank " + std::to_string(h->meta.destination) + " does not live here";
    } else {
      bad = h ? s.error().message : h.error().message;
    }
    if (!bad.empty()) {
      close("ucx data plane, process " + std::to_string(p) + ": " + bad);
      return any;
    }
    auto op = std::make_shared<recv_op>();
    op->from = static_cast<int>(h->meta.source);
    op->to = static_cast<int>(h->meta.destination);
    op->tag = h->meta.tag;
    if (auto dst = posted->claim(op->to, op->from, op->tag, h->type, *s))
      op->t = std::move(*dst);  // a rank posted a buffer for exactly this message
    else
      op->t = tensor::empty(std::move(*s), h->type);
    incoming[static_cast<std::size_t>(p)].push_back(op);
    if (h->payload_bytes == 0) {
      op->complete = true;
      continue;
    }
    ucp_request_param_t pp{};
    pp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    pp.cb.recv = on_recv;
    pp.user_data = op.get();
    const std::uint64_t seq = info.sender_tag & ((std::uint64_t{1} << 40) - 1);
    ucs_status_ptr_t pr = ucp_tag_recv_nbx(worker, op->t.data<std::byte>(), h->payload_bytes, ucx_tag(payload_kind, p, seq),
                                           ~std::uint64_t{0}, &pp);
    if (UCS_PTR_IS_ERR(pr)) {
      close("ucx: receiving a payload: " + std::string(ucs_status_string(UCS_PTR_STATUS(pr))));
      return any;
    }
    if (pr == nullptr) op->complete = true;
  }
}

void ucx_fabric::impl::deliver() {
  for (auto& q : incoming)
    while (!q.empty() && q.front()->complete) {
      auto op = q.front();
      q.pop_front();
      if (op->status != UCS_OK) {
        close("ucx: a payload from rank " + std::to_string(op->from) + ": " + ucs_status_string(op->status));
        return;
      }
      posted->complete(op->to, op->t);
      boxes[static_cast<std::size_t>(op->to)]->put(op->from, op->tag, std::move(op->t));
    }
}

bool ucx_fabric::impl::progress_once() {
  std::deque<std::shared_ptr<send_op>> todo;
  {
    std::lock_guard<std::mutex> lock(send_mutex);
    todo.swap(queue);
  }
  for (auto& op : todo) post(op);
  bool busy = !todo.empty();
  while (ucp_worker_progress(worker) != 0) busy = true;
  busy = probe_headers() || busy;
  deliver();
  std::erase_if(in_flight, [](const std::shared_ptr<send_op>& op) { return op->pending == 0; });
  return busy;
}

void ucx_fabric::impl::run() {
  while (!stopping) {
    if (!drivers.wait_turn(std::chrono::milliseconds(100), stopping)) continue;  // ranks drive it themselves
    bool armed = false;
    {
      std::lock_guard<std::mutex> lock(progress_mutex);
      if (progress_once()) continue;
      armed = ucp_worker_arm(worker) == UCS_OK;
    }
    if (armed && drivers.begin_blocking()) {  // a rank that starts driving signals the worker
      pollfd pfd{efd, POLLIN, 0};
      ::poll(&pfd, 1, 100);
      drivers.end_blocking();
    }
  }
  std::lock_guard<std::mutex> lock(progress_mutex);
  shutdown();
}

// On the progress thread: cancel what is pending, close endpoints, release the worker.
void ucx_fabric::impl::shutdown() {
  for (auto ep : eps) {
    if (ep == nullptr) continue;
    ucp_request_param_t cp{};
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &cp);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
      for (int i = 0; i < 100000 && ucp_request_check_status(r) == UCS_INPROGRESS; ++i) ucp_worker_progress(worker);
      ucp_request_free(r);
    }
  }
  eps.clear();
  while (ucp_worker_progress(worker) != 0) {
  }
}

ucx_fabric::ucx_fabric(std::unique_ptr<impl> p) : p_(std::move(p)) {}

result<std::shared_ptr<ucx_fabric>> ucx_fabric::create(const tcp_fabric_options& o) {
  auto p = std::make_unique<impl>();
  p->o = o;
  ucp_config_t* cfg = nullptr;
  if (auto st = ucp_config_read(nullptr, nullptr, &cfg); st != UCS_OK) return ucx_error("reading the configuration", st);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucs_status_t st = ucp_init(&params, cfg, &p->context);
  ucp_config_release(cfg);
  if (st != UCS_OK) return ucx_error("init", st);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // the progress thread, or a waiting rank holding progress_mutex
  if (st = ucp_worker_create(p->context, &wp, &p->worker); st != UCS_OK) {
    ucp_cleanup(p->context);
    return ucx_error("worker", st);
  }
  if (st = ucp_worker_get_efd(p->worker, &p->efd); st != UCS_OK) {
    ucp_worker_destroy(p->worker);
    ucp_cleanup(p->context);
    return ucx_error("event fd", st);
  }
  ucp_address_t* a = nullptr;
  std::size_t alen = 0;
  if (st = ucp_worker_get_address(p->worker, &a, &alen); st != UCS_OK) {
    ucp_worker_destroy(p->worker);
    ucp_cleanup(p->context);
    return ucx_error("worker address", st);
  }
  p->my_address.assign(reinterpret_cast<const char*>(a), alen);
  ucp_worker_release_address(p->worker, a);
  const int ranks = static_cast<int>(o.process_of_rank.size());
  for (int r = 0; r < ranks; ++r) {
    const bool local = p->is_local(r);
    p->boxes.push_back(local ? std::make_unique<mailbox>() : nullptr);
    p->endpoints.push_back(local ? std::make_unique<ucx_endpoint>(*p, r) : nullptr);
  }
  p->posted = std::make_unique<posted_receives>(ranks);
  p->next_seq.assign(o.peers.size(), 0);
  p->incoming.resize(o.peers.size());
  return std::shared_ptr<ucx_fabric>(new ucx_fabric(std::move(p)));
}

status ucx_fabric::connect(const std::vector<std::string>& addresses) {
  auto& p = *p_;
  if (addresses.size() != p.o.peers.size())
    return make_error(errc::invalid_argument, "ucx: " + std::to_string(addresses.size()) + " addresses for " +
                                                  std::to_string(p.o.peers.size()) + " processes");
  p.eps.assign(addresses.size(), nullptr);
  for (std::size_t q = 0; q < addresses.size(); ++q) {
    if (static_cast<int>(q) == p.o.process) continue;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[q].data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;  // allows shared memory; the control plane detects failures
    if (auto st = ucp_ep_create(p.worker, &ep, &p.eps[q]); st != UCS_OK)
      return ucx_error("endpoint to process " + std::to_string(q), st);
  }
  p.drivers.set_interrupt([&p] { ucp_worker_signal(p.worker); });
  p.progress = std::thread([&p] { p.run(); });
  return {};
}

ucx_fabric::~ucx_fabric() {
  auto& p = *p_;
  p.close("the fabric was shut down");
  p.stopping = true;
  p.drivers.wake();
  ucp_worker_signal(p.worker);
  if (p.progress.joinable()) p.progress.join();
  else p.shutdown();
  p.in_flight.clear();
  p.incoming.clear();
  ucp_worker_destroy(p.worker);
  ucp_cleanup(p.context);
}

const std::string& ucx_fabric::address() const { return p_->my_address; }
int ucx_fabric::size() const { return static_cast<int>(p_->o.process_of_rank.size()); }
bool ucx_fabric::is_local(int rank) const { return p_->is_local(rank); }
channel& ucx_fabric::endpoint(int rank) {
  if (!is_local(rank)) throw std::invalid_argument("ucx_fabric: rank " + std::to_string(rank) + " is not in this process");
  return *p_->endpoints[static_cast<std::size_t>(rank)];
}
void ucx_fabric::close(const std::string& why) { p_->close(why); }
std::string ucx_fabric::closed_reason() const { return p_->reason(); }

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

result<std::string> from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) return make_error(errc::io_error, "hex text of odd length");
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    int hi = value(hex[i]), lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0) return make_error(errc::io_error, "not hex text");
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

}  // namespace cohort::transport
