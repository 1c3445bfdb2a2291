// UCX fabric: one worker, one progress thread, two tagged messages per tensor (a header, then
// the payload, received into the buffer a waiting rank posted when it posted one).
#include "transport/ucx_fabric.hpp"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "transport/progress_handoff.hpp"
#include "transport/spin_policy.hpp"
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
  tensor body;  // held until UCX is done with it
  std::size_t payload = 0;
  int pending = 0;    // UCX requests not yet complete (progress thread only)
  bool done = false;  // guarded by the fabric's send mutex
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

// The fabric's UCX side; also where it lands offered buffers (one site for every peer process).
struct ucx_fabric::impl : fabric_base::landing_site {
  impl(ucx_fabric& owner, const tcp_fabric_options& options)
      : f(owner), o(options), postings(static_cast<int>(options.process_of_rank.size())) {}
  ucx_fabric& f;
  tcp_fabric_options o;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int efd = -1;
  std::string my_address;
  std::vector<ucp_ep_h> eps;

  std::mutex send_mutex;
  std::condition_variable send_done;
  std::deque<std::shared_ptr<send_op>> queue;  // handed to the progress thread

  // Every UCX call happens under progress_mutex: by the progress thread, or by a rank that
  // waits for a message or a send (it drives progress itself for a while instead of
  // waiting for the progress thread to wake up: microseconds instead of a thread hand-off).
  std::mutex progress_mutex;
  progress_handoff drivers;  // ranks driving progress now, or the progress thread
  posted_receives postings;  // guarded by progress_mutex
  std::vector<std::uint64_t> next_seq;
  std::vector<std::deque<std::shared_ptr<recv_op>>> incoming;  // by source process, in order
  std::vector<std::shared_ptr<send_op>> in_flight;
  std::thread progress;
  std::atomic<bool> stopping{false};
  std::chrono::nanoseconds spin = std::chrono::microseconds(500);  // how long a waiting rank drives progress

  // Offered landing buffers are posted and withdrawn under progress_mutex.
  std::mutex& lock() override { return progress_mutex; }
  posted_receives& posted() override { return postings; }
  // a message whose header came is arriving into a buffer of its own
  bool arriving(int me, int from, std::uint64_t tag) const override {
    const auto& q = incoming[static_cast<std::size_t>(o.process_of_rank[static_cast<std::size_t>(from)])];
    return std::any_of(q.begin(), q.end(),
                       [&](const auto& op) { return op->to == me && op->from == from && op->tag == tag; });
  }
  bool detach(int /*me*/) override { return false; }  // UCX cannot stop a receive it has matched

  status start();  // the context, the worker, its event fd and address
  status send(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout);
  result<tensor> recv(int me, int from, std::uint64_t tag, milliseconds timeout);
  void wake_senders();   // the fabric closed
  bool progress_once();  // with progress_mutex held; true when something happened
  bool try_progress();   // progress_once() if nobody else is progressing
  void run();
  void post(const std::shared_ptr<send_op>& op);
  bool probe_headers();
  void deliver();
  void finish_op(send_op* op, ucs_status_t st);
  void shutdown();
};

namespace {

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

// A frame to a rank of another process.
status ucx_fabric::impl::send(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout) {
  auto op = std::make_shared<send_op>();
  op->process = o.process_of_rank[static_cast<std::size_t>(to)];
  op->body = t.is_contiguous() ? std::move(t) : t.contiguous();
  op->head = encode_frame_prefix({.generation = o.generation,
                                  .tag = tag,
                                  .source = static_cast<std::uint32_t>(from),
                                  .destination = static_cast<std::uint32_t>(to)},
                                 op->body);
  op->payload = static_cast<std::size_t>(op->body.numel()) * size_of(op->body.type());
  {
    std::lock_guard<std::mutex> lock(send_mutex);
    if (auto why = f.closed_reason(); !why.empty()) return make_error(errc::closed, "send: channel closed: " + why);
    queue.push_back(op);
  }
  const spin_window window(spin);
  drivers.enter();
  bool sent = false;
  for (;;) {
    try_progress();
    {
      std::lock_guard<std::mutex> lock(send_mutex);
      sent = op->done;
      if (sent || f.is_closed()) break;
    }
    if (!window.active()) break;
    window.pause();
  }
  drivers.leave(sent);
  if (!sent) ucp_worker_signal(worker);  // the progress thread takes over what is left
  std::unique_lock<std::mutex> lock(send_mutex);
  send_done.wait_for(lock, timeout, [&] { return op->done || f.is_closed(); });
  if (op->done && op->status != UCS_OK) return ucx_error("send to rank " + std::to_string(to), op->status);
  if (op->done) return {};
  if (auto why = f.closed_reason(); !why.empty()) return make_error(errc::closed, "send: channel closed: " + why);
  return make_error(errc::timeout, "send: rank " + std::to_string(from) + " to rank " + std::to_string(to) +
                                       " not delivered in " + std::to_string(timeout.count()) + " ms");
}

// A wait for a message from any rank: the rank drives progress for a while, then sleeps on its mailbox.
result<tensor> ucx_fabric::impl::recv(int me, int from, std::uint64_t tag, milliseconds timeout) {
  mailbox& box = f.box(me);
  const spin_window window(std::min<std::chrono::nanoseconds>(spin, timeout));
  drivers.enter();
  do {
    if (auto t = box.try_take(from, tag)) {
      drivers.leave(/*satisfied=*/true);
      return std::move(*t);
    }
    if (f.is_closed()) break;
    try_progress();
    window.pause();
  } while (window.active());
  drivers.leave(/*satisfied=*/false);
  ucp_worker_signal(worker);  // the progress thread takes over
  return box.take(from, tag, timeout, me);
}

void ucx_fabric::impl::wake_senders() {
  { std::lock_guard<std::mutex> lock(send_mutex); }  // a sender checks is_closed() under it, then waits
  send_done.notify_all();
  if (worker) ucp_worker_signal(worker);
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
    if (p < 0 || p >= static_cast<int>(eps.size()) || p == o.process)
      bad = "a message from unknown process " + std::to_string(p);
    std::vector<std::byte> sink;  // an oversized header is still taken off the queue
    if (!bad.empty()) sink.resize(len);
    ucp_request_param_t rp{};
    ucs_status_ptr_t r =
        ucp_tag_msg_recv_nbx(worker, bad.empty() ? static_cast<void*>(head) : sink.data(), len, msg, &rp);
    if (UCS_PTR_IS_ERR(r)) {
      f.close("ucx: receiving a header: " + std::string(ucs_status_string(UCS_PTR_STATUS(r))));
      return any;
    }
    if (r != nullptr) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(r);
    }
    if (!bad.empty()) {
      f.close("ucx data plane: " + bad);
      return any;
    }
    auto h = decode_frame_header(std::span<const std::byte>(head, len), {.ranks = ranks});
    result<shape> s =
        h ? decode_frame_shape(*h, std::span<const std::byte>(head + frame_header_bytes, len - frame_header_bytes))
          : result<shape>(h.error());
    if (h && s) {
      if (h->meta.generation != o.generation)
        bad = "a frame of generation " + std::to_string(h->meta.generation);
      else if (!f.routed(h->meta, p))
        bad = f.route_problem(h->meta, p);
    } else {
      bad = h ? s.error().message : h.error().message;
    }
    if (!bad.empty()) {
      f.close("ucx data plane, process " + std::to_string(p) + ": " + bad);
      return any;
    }
    auto op = std::make_shared<recv_op>();
    op->from = static_cast<int>(h->meta.source);
    op->to = static_cast<int>(h->meta.destination);
    op->tag = h->meta.tag;
    if (auto dst = postings.claim(op->to, op->from, op->tag, h->type, *s))
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
    ucs_status_ptr_t pr = ucp_tag_recv_nbx(worker, op->t.data<std::byte>(), h->payload_bytes,
                                           ucx_tag(payload_kind, p, seq), ~std::uint64_t{0}, &pp);
    if (UCS_PTR_IS_ERR(pr)) {
      f.close("ucx: receiving a payload: " + std::string(ucs_status_string(UCS_PTR_STATUS(pr))));
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
        f.close("ucx: a payload from rank " + std::to_string(op->from) + ": " + ucs_status_string(op->status));
        return;
      }
      postings.complete(op->to, op->t);
      f.box(op->to).put(op->from, op->tag, std::move(op->t));
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

ucx_fabric::ucx_fabric(const tcp_fabric_options& o)
    : fabric_base("ucx_fabric", o.process_of_rank, o.process), p_(std::make_unique<impl>(*this, o)) {
  make_endpoints<local_endpoint>(*this);
  p_->next_seq.assign(o.peers.size(), 0);
  p_->incoming.resize(o.peers.size());
}

result<std::shared_ptr<ucx_fabric>> ucx_fabric::create(const tcp_fabric_options& o) {
  std::shared_ptr<ucx_fabric> f(new ucx_fabric(o));
  if (auto st = f->p_->start(); !st) return st.error();  // the destructor releases what did start
  return f;
}

status ucx_fabric::impl::start() {
  ucp_config_t* cfg = nullptr;
  if (auto st = ucp_config_read(nullptr, nullptr, &cfg); st != UCS_OK)
    return ucx_error("reading the configuration", st);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucs_status_t st = ucp_init(&params, cfg, &context);
  ucp_config_release(cfg);
  if (st != UCS_OK) {
    context = nullptr;
    return ucx_error("init", st);
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // the progress thread, or a waiting rank holding progress_mutex
  if (st = ucp_worker_create(context, &wp, &worker); st != UCS_OK) {
    worker = nullptr;
    return ucx_error("worker", st);
  }
  if (st = ucp_worker_get_efd(worker, &efd); st != UCS_OK) return ucx_error("event fd", st);
  ucp_address_t* a = nullptr;
  std::size_t alen = 0;
  if (st = ucp_worker_get_address(worker, &a, &alen); st != UCS_OK) return ucx_error("worker address", st);
  my_address.assign(reinterpret_cast<const char*>(a), alen);
  ucp_worker_release_address(worker, a);
  return {};
}

status ucx_fabric::connect(const std::vector<std::string>& addresses) {
  auto& p = *p_;
  if (addresses.size() != p.o.peers.size())
    return make_error(errc::invalid_argument, "ucx: " + std::to_string(addresses.size()) + " addresses for " +
                                                  std::to_string(p.o.peers.size()) + " processes");
  p.eps.assign(addresses.size(), nullptr);
  for (std::size_t q = 0; q < addresses.size(); ++q) {
    if (static_cast<int>(q) == p.o.process) continue;
    if (!p.o.members.empty() && (q >= p.o.members.size() || !p.o.members[q])) continue;  // not in the job any more
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
  close("the fabric was shut down");
  p.stopping = true;
  p.drivers.wake();
  if (p.worker) ucp_worker_signal(p.worker);
  if (p.progress.joinable())
    p.progress.join();
  else if (p.worker)
    p.shutdown();
  p.in_flight.clear();
  p.incoming.clear();
  if (p.worker) ucp_worker_destroy(p.worker);
  if (p.context) ucp_cleanup(p.context);
}

const std::string& ucx_fabric::address() const { return p_->my_address; }
status ucx_fabric::send_remote(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout) {
  return p_->send(from, to, tag, std::move(t), timeout);
}
// A rank waiting on a rank of its own process drives UCX progress too (for the other ranks).
result<tensor> ucx_fabric::recv_local(int me, int from, std::uint64_t tag, milliseconds timeout) {
  return p_->recv(me, from, tag, timeout);
}
result<tensor> ucx_fabric::recv_remote(int me, int from, std::uint64_t tag, milliseconds timeout) {
  return p_->recv(me, from, tag, timeout);
}
fabric_base::landing_site& ucx_fabric::landing_site_of(int /*from*/) { return *p_; }
void ucx_fabric::on_close() { p_->wake_senders(); }

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
