// The TCP mesh: connection set-up, validated reader threads, framed sends.
#include "transport/tcp_fabric.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

#include "transport/auth.hpp"
#include "transport/progress_handoff.hpp"
#include "transport/spin_policy.hpp"
#include "transport/wire.hpp"

namespace cohort::transport {
namespace {

constexpr std::uint64_t hello_tag = ~std::uint64_t{0};  // the first frame on a connection

}  // namespace

// A frame being read off a connection, a piece at a time, so that whoever holds the read
// lock (the reader thread, a waiting rank, or a rank whose send waits for room) takes what is
// there and never blocks on the rest: two processes sending each other large frames drain
// each other from the same threads.
struct frame_in_progress {
  enum class stage { header, shape, payload, discard } at = stage::header;
  std::byte head[frame_header_bytes];
  std::vector<std::byte> dims;
  frame_prefix prefix;
  tensor body;
  std::size_t have = 0;            // bytes of the current stage read so far
  std::uint64_t discard_left = 0;  // a stale frame's payload still to skip
  std::chrono::steady_clock::time_point last_progress = std::chrono::steady_clock::now();
  bool idle() const { return at == stage::header && have == 0; }
};

struct tcp_fabric::connection : fabric_base::landing_site {
  explicit connection(int ranks) : postings(ranks) {}
  tcp_socket socket;
  std::mutex write;
  std::mutex read;                 // held while reading: by the reader thread or a rank
  frame_in_progress in;            // guarded by `read`
  progress_handoff readers;        // ranks reading this connection themselves, or the reader thread
  posted_receives postings;        // guarded by `read`: where ranks want their next payloads
  event_fd wake;                   // interrupts the reader thread's poll when a rank starts reading
  std::int64_t send_buffer = 0;    // bytes the kernel buffers for sending (after set_buffers)
  std::vector<std::byte> discard;  // scratch for a stale frame's body
  // Bytes read past the piece being read (guarded by `read`): a short piece - a header, a
  // shape, a small payload - takes what the socket has, up to this buffer, in one read (a
  // frame's header and shape, or whole small frames, for one system call), and the pieces
  // after it come from here. Empty whenever pump() returns without an error, so that a
  // poll() on the socket sees everything not yet delivered.
  // 4 KiB and a header's worth: a frame of 4 KiB of payload (its header and a shape of up to
  // rank 3 included) comes in one read (1.12x at 4 KiB against 4 KiB exactly, paired A/B).
  std::array<std::byte, 4096 + 64> ahead;
  std::size_t ahead_begin = 0, ahead_end = 0;

  // Offered landing buffers are posted and withdrawn under the read lock.
  std::mutex& lock() override { return read; }
  posted_receives& posted() override { return postings; }
  bool arriving(int me, int from, std::uint64_t tag) const override {
    const auto& m = in.prefix.meta;
    return in.at == frame_in_progress::stage::payload && m.destination == static_cast<std::uint32_t>(me) &&
           m.source == static_cast<std::uint32_t>(from) && m.tag == tag;
  }
  // A rank gave up while the payload was arriving into its buffer: it goes on into one of its own.
  bool detach(int me) override {
    if (in.at == frame_in_progress::stage::payload && postings.aliases(me, in.body)) {
      tensor own = tensor::empty(in.body.shape(), in.body.type());
      if (in.have > 0) std::memcpy(own.data<std::byte>(), in.body.data<std::byte>(), in.have);
      in.body = std::move(own);
    }
    return true;
  }
};

// The TCP endpoint's sizes; routing and the rest are fabric_base's.
class tcp_fabric::endpoint_impl : public fabric_base::local_endpoint {
 public:
  endpoint_impl(tcp_fabric& f, int rank) : local_endpoint(f, rank), f_(f) {}
  // one frame within loopback's 64 KiB segments: the peer reads and reduces it while the rest
  // of the piece travels
  std::int64_t first_chunk_bytes(int /*peer*/) const override { return std::int64_t{32} << 10; }
  // what the socket's send buffer holds, at most 1 MiB (measured on loopback: recursive
  // doubling at 128 KiB - 1 MiB 1.1-1.6x faster with the buffer sent whole first)
  std::int64_t send_ahead_bytes(int peer) const override {
    if (peer < 0 || peer >= size() || f_.is_local(peer)) return 0;  // nothing to send ahead to
    const auto& c = *f_.conns_[static_cast<std::size_t>(f_.o_.process_of_rank[static_cast<std::size_t>(peer)])];
    return std::min<std::int64_t>(c.send_buffer, std::int64_t{1} << 20);
  }

 private:
  tcp_fabric& f_;
};

tcp_fabric::tcp_fabric(const tcp_fabric_options& o) : fabric_base("tcp_fabric", o.process_of_rank, o.process), o_(o) {
  make_endpoints<endpoint_impl>(*this);
  conns_.resize(o.peers.size());
}

fabric_base::landing_site& tcp_fabric::landing_site_of(int from) {
  return *conns_[static_cast<std::size_t>(process_of(from))];
}

result<std::shared_ptr<tcp_fabric>> tcp_fabric::connect(tcp_listener& listener, const tcp_fabric_options& o) {
  const int processes = static_cast<int>(o.peers.size());
  if (o.process < 0 || o.process >= processes)
    return make_error(errc::invalid_argument,
                      "tcp fabric: process " + std::to_string(o.process) + " of " + std::to_string(processes));
  // the members: every process, or after a loss the ones that remain
  std::vector<bool> member =
      o.members.empty() ? std::vector<bool>(static_cast<std::size_t>(processes), true) : o.members;
  if (member.size() != static_cast<std::size_t>(processes) || !member[static_cast<std::size_t>(o.process)])
    return make_error(errc::invalid_argument, "tcp fabric: the members must name every process, this one among them");
  for (int p : o.process_of_rank)
    if (p < 0 || p >= processes || !member[static_cast<std::size_t>(p)])
      return make_error(errc::invalid_argument,
                        "tcp fabric: a rank on process " + std::to_string(p) + ", which is not a member");
  int members_before = 0;
  for (int p = 0; p < o.process; ++p) members_before += member[static_cast<std::size_t>(p)] ? 1 : 0;
  std::shared_ptr<tcp_fabric> f(new tcp_fabric(o));
  const decode_limits limits{.max_payload_bytes = 0,
                             .check_generation = true,
                             .expected_generation = o.generation,
                             .ranks = static_cast<std::uint32_t>(processes)};
  // Accept the members before this one while connecting to those after it.
  status accepted;
  // a connection (`attempt`: one try within the time it is given), within the timeout; in
  // slices of 100 ms where the wait may be abandoned
  auto within_timeout = [&](auto attempt, const std::string& what) -> result<tcp_socket> {
    const auto deadline = std::chrono::steady_clock::now() + o.timeout;
    for (;;) {
      if (o.abandon && o.abandon())
        return make_error(errc::closed, "a member of the new data plane is gone (the job's membership changed)");
      const auto left = std::max(milliseconds(1),
                                 std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()));
      result<tcp_socket> s = attempt(o.abandon ? std::min(left, milliseconds(100)) : left);
      if (s || s.error().code != errc::timeout) return s;
      if (std::chrono::steady_clock::now() >= deadline)
        return make_error(errc::timeout, what + " for " + std::to_string(o.timeout.count()) + " ms");
    }
  };
  auto accept_one = [&] {
    return within_timeout([&](milliseconds t) { return listener.accept(t); },
                          "accept on port " + std::to_string(listener.port()) + ": nobody came in");
  };
  auto connect_one = [&](const process_address& peer) {
    return within_timeout([&](milliseconds t) { return tcp_socket::connect(peer.host, peer.port, t); },
                          "connect to " + peer.host + ":" + std::to_string(peer.port) + " failed");
  };
  std::thread acceptor([&] {
    for (int n = 0; n < members_before; ++n) {
      auto s = accept_one();
      if (!s) {
        accepted =
            make_error(s.error().code, "tcp fabric: process " + std::to_string(o.process) + " waiting for " +
                                           std::to_string(members_before - n) + " more peers: " + s.error().message);
        return;
      }
      if (auto st = authenticate_server(*s, o.secret, o.timeout); !st) {
        std::fprintf(stderr, "cohort: refused a data connection: %s\n", st.error().message.c_str());
        --n;
        continue;
      }
      std::byte head[frame_header_bytes];
      auto st = s->recv_exact(head, sizeof head, o.timeout);
      auto h = st ? decode_frame_header(head, limits) : result<frame_prefix>(st.error());
      if (h && (h->meta.tag != hello_tag || h->meta.destination != static_cast<std::uint32_t>(o.process) ||
                h->meta.source >= static_cast<std::uint32_t>(o.process) || !member[h->meta.source] || h->rank != 1 ||
                h->payload_bytes != 0 || f->conns_[h->meta.source]))
        h = make_error(errc::io_error, "unexpected hello from " + s->peer_name());
      std::byte dims[8];
      if (h) {
        if (auto d = s->recv_exact(dims, sizeof dims, o.timeout); !d) h = d.error();
      }
      if (!h) {
        std::fprintf(stderr, "cohort: refused a data connection: %s\n", h.error().message.c_str());
        --n;
        continue;
      }
      auto c = std::make_unique<connection>(static_cast<int>(o.process_of_rank.size()));
      c->socket = std::move(*s);
      f->conns_[h->meta.source] = std::move(c);
    }
  });
  status connected;
  for (int p = o.process + 1; p < processes && connected; ++p) {
    if (!member[static_cast<std::size_t>(p)]) continue;
    const auto& peer = o.peers[static_cast<std::size_t>(p)];
    // a peer that left this connect (its own failed) never takes the handshake: with abandon,
    // the handshake is tried a second at a time, the wait given up once a member is gone
    result<tcp_socket> s = make_error(errc::timeout, "not connected");
    const auto deadline = std::chrono::steady_clock::now() + o.timeout;
    for (;;) {
      s = connect_one(peer);
      if (!s) break;
      const auto left = std::max(milliseconds(1),
                                 std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()));
      auto st = authenticate_client(*s, o.secret, o.abandon ? std::min(left, milliseconds(1000)) : left);
      if (st) break;
      s = st.error();
      if (!o.abandon || std::chrono::steady_clock::now() >= deadline) break;  // else: a handshake not taken
      if (o.abandon()) {
        s = make_error(errc::closed, "a member of the new data plane is gone (the job's membership changed)");
        break;
      }
    }
    if (s) {
      const auto hello = encode_frame({.generation = o.generation,
                                       .tag = hello_tag,
                                       .source = static_cast<std::uint32_t>(o.process),
                                       .destination = static_cast<std::uint32_t>(p)},
                                      tensor::empty(shape{0}));
      if (auto st = s->send_all(hello.data(), hello.size(), o.timeout); !st) s = st.error();
    }
    if (!s) {
      connected = make_error(s.error().code, "tcp fabric: process " + std::to_string(o.process) + " to process " +
                                                 std::to_string(p) + " (" + peer.host + ":" +
                                                 std::to_string(peer.port) + "): " + s.error().message);
      break;
    }
    auto c = std::make_unique<connection>(static_cast<int>(o.process_of_rank.size()));
    c->socket = std::move(*s);
    f->conns_[static_cast<std::size_t>(p)] = std::move(c);
  }
  acceptor.join();
  if (!connected) return connected.error();
  if (!accepted) return accepted.error();
  for (int p = 0; p < processes; ++p)
    if (p != o.process && member[static_cast<std::size_t>(p)]) {
      connection& c = *f->conns_[static_cast<std::size_t>(p)];
      c.socket.set_buffers(4 << 20);  // the kernel caps it at net.core.wmem_max / rmem_max
      c.send_buffer = c.socket.send_buffer_bytes();
    }
  for (int p = 0; p < processes; ++p)
    if (p != o.process && member[static_cast<std::size_t>(p)]) {
      connection& c = *f->conns_[static_cast<std::size_t>(p)];
      c.readers.set_interrupt([&c] { c.wake.signal(); });
      f->readers_.emplace_back([raw = f.get(), p] { raw->read_loop(p); });
    }
  return f;
}

tcp_fabric::~tcp_fabric() {
  stopping_ = true;
  for (auto& c : conns_)
    if (c) {
      c->socket.shutdown();
      c->readers.wake();
    }
  for (auto& t : readers_) t.join();
  close("the fabric was shut down");
}

status tcp_fabric::send_remote(int from, int to, std::uint64_t tag, tensor t, milliseconds timeout) {
  if (auto why = closed_reason(); !why.empty()) return make_error(errc::closed, "send: channel closed: " + why);
  const int p = o_.process_of_rank[static_cast<std::size_t>(to)];
  connection& c = *conns_[static_cast<std::size_t>(p)];
  const tensor body = t.is_contiguous() ? t : t.contiguous();
  const auto prefix = encode_frame_prefix({.generation = o_.generation,
                                           .tag = tag,
                                           .source = static_cast<std::uint32_t>(from),
                                           .destination = static_cast<std::uint32_t>(to)},
                                          body);
  const std::size_t payload = static_cast<std::size_t>(body.numel()) * size_of(body.type());
  // While the peer has no room for us, read what it sends us (it may be waiting for room too).
  status read_failed;
  auto drain = [&]() -> bool {
    std::unique_lock<std::mutex> lock(c.read, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    if (auto r = pump(c, p); !r) read_failed = r;
    return true;
  };
  status st;
  {
    std::lock_guard<std::mutex> lock(c.write);
    st = c.socket.send_all(prefix.data(), prefix.size(), payload ? body.data<std::byte>() : nullptr, payload, timeout,
                           drain);
  }
  if (!read_failed)
    close("data connection with process " + std::to_string(p) + " (" + c.socket.peer_name() +
          "): " + read_failed.error().message);
  if (!st) {
    const std::string why =
        "sending to rank " + std::to_string(to) + " (process " + std::to_string(p) + "): " + st.error().message;
    close(why);
    return make_error(st.error().code, why);
  }
  return {};
}

// Up to `want` bytes of the piece being read: first what an earlier read brought in ahead of
// it; then, for a piece shorter than the look-ahead buffer, what the socket has (into that
// buffer); a longer one straight from the socket into place. 0: nothing there now.
result<std::size_t> tcp_fabric::read_piece(connection& c, std::byte* target, std::size_t want) {
  if (c.ahead_begin == c.ahead_end) {
    if (want >= c.ahead.size()) return c.socket.read_some(target, want);
    auto got = c.socket.read_some(c.ahead.data(), c.ahead.size());
    if (!got || *got == 0) return got;  // an error, or nothing there (one read, not two)
    c.ahead_begin = 0;
    c.ahead_end = *got;
  }
  const std::size_t n = std::min(want, c.ahead_end - c.ahead_begin);
  std::memcpy(target, c.ahead.data() + c.ahead_begin, n);
  c.ahead_begin += n;
  return n;
}

status tcp_fabric::pump(connection& c, int p) {
  frame_in_progress& f = c.in;
  using stage = frame_in_progress::stage;
  for (;;) {
    std::byte* target = nullptr;
    std::size_t want = 0;
    switch (f.at) {
      case stage::header:
        target = f.head + f.have;
        want = frame_header_bytes - f.have;
        break;
      case stage::shape:
        target = f.dims.data() + f.have;
        want = f.dims.size() - f.have;
        break;
      case stage::payload:
        target = f.body.data<std::byte>() + f.have;
        want = f.prefix.payload_bytes - f.have;
        break;
      case stage::discard:
        c.discard.resize(static_cast<std::size_t>(std::min<std::uint64_t>(f.discard_left, 1 << 20)));
        target = c.discard.data();
        want = c.discard.size();
        break;
    }
    auto got = read_piece(c, target, want);
    if (!got) return got.error();
    if (*got == 0) return {};  // nothing more for now
    f.last_progress = std::chrono::steady_clock::now();
    if (f.at == stage::discard) {
      f.discard_left -= *got;
      if (f.discard_left == 0) f = frame_in_progress{};
      continue;
    }
    f.have += *got;
    if (*got < want) continue;  // this stage is not complete yet
    if (f.at == stage::header) {
      auto h = decode_frame_header(f.head, {.ranks = static_cast<std::uint32_t>(size())});
      if (!h) return h.error();
      f.prefix = *h;
      f.dims.assign(static_cast<std::size_t>(h->rank) * 8, std::byte{0});
      f.at = stage::shape;
      f.have = 0;
      if (!f.dims.empty()) continue;
    }
    if (f.at == stage::shape) {
      auto sh = decode_frame_shape(f.prefix, f.dims);
      if (!sh) return sh.error();
      const auto& meta = f.prefix.meta;
      if (meta.generation != o_.generation) {  // a frame of an older job: skip its body, log it
        std::fprintf(stderr, "cohort: dropped a frame of generation %llu from process %d (the job is at %llu)\n",
                     static_cast<unsigned long long>(meta.generation), p,
                     static_cast<unsigned long long>(o_.generation));
        f.discard_left = f.prefix.payload_bytes;
        f.at = stage::discard;
        if (f.discard_left == 0) f = frame_in_progress{};
        continue;
      }
      if (!routed(meta, p)) return make_error(errc::io_error, "frame: " + route_problem(meta, p));
      if (auto dst = c.postings.claim(static_cast<int>(meta.destination), static_cast<int>(meta.source), meta.tag,
                                      f.prefix.type, *sh))
        f.body = std::move(*dst);  // a rank posted a buffer for exactly this message
      else
        f.body = tensor::empty(std::move(*sh), f.prefix.type);
      f.at = stage::payload;
      f.have = 0;
      if (f.prefix.payload_bytes > 0) continue;
    }
    // stage::payload complete: deliver
    c.postings.complete(static_cast<int>(f.prefix.meta.destination), f.body);
    box(static_cast<int>(f.prefix.meta.destination))
        .put(static_cast<int>(f.prefix.meta.source), f.prefix.meta.tag, std::move(f.body));
    f = frame_in_progress{};
  }
}

// A rank waiting for a remote message reads frames off that process's connection itself for
// a while (no hand-off from the reader thread: tens of microseconds per message on a
// loaded machine), then leaves it to the reader thread and sleeps on its mailbox. How long,
// and whether at all while the cores are contended, is the spin policy's (spin_policy.hpp).
result<tensor> tcp_fabric::recv_remote(int me, int from, std::uint64_t tag, milliseconds timeout) {
  mailbox& inbox = box(me);
  const int p = o_.process_of_rank[static_cast<std::size_t>(from)];
  connection& c = *conns_[static_cast<std::size_t>(p)];
  const spin_window spin(std::min<std::chrono::nanoseconds>(std::chrono::microseconds(1000), timeout));
  c.readers.enter();
  do {
    if (auto t = inbox.try_take(from, tag)) {
      c.readers.leave(/*satisfied=*/true);
      return std::move(*t);
    }
    if (!closed_reason().empty()) break;
    {
      std::unique_lock<std::mutex> lock(c.read, std::try_to_lock);
      if (lock.owns_lock()) {
        if (auto st = pump(c, p); !st) {
          close("data connection with process " + std::to_string(p) + " (" + c.socket.peer_name() +
                "): " + st.error().message);
          break;
        }
      }
    }
    spin.pause();
  } while (spin.active());
  // Then wait in the kernel on the connection itself while no one else reads it: one wake-up
  // when the frame comes (a thread that slept preempts a CPU-bound neighbour at once), where
  // handing over to the reader thread costs two (docs/benchmarks.md has the A/B).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && closed_reason().empty()) {
    if (auto t = inbox.try_take(from, tag)) {
      c.readers.leave(/*satisfied=*/true);
      return std::move(*t);
    }
    std::unique_lock<std::mutex> lock(c.read, std::try_to_lock);
    if (!lock.owns_lock()) break;  // someone else reads it: sleep on the mailbox
    if (!c.socket.wait_readable(std::min<milliseconds>(milliseconds(10), timeout))) continue;
    if (auto st = pump(c, p); !st) {
      close("data connection with process " + std::to_string(p) + " (" + c.socket.peer_name() +
            "): " + st.error().message);
      break;
    }
  }
  c.readers.leave(/*satisfied=*/false);  // the reader thread takes over
  return inbox.take(from, tag, timeout, me);
}

void tcp_fabric::read_loop(int p) {
  connection& c = *conns_[static_cast<std::size_t>(p)];
  while (!stopping_) {
    if (!c.readers.wait_turn(milliseconds(200), stopping_)) continue;  // ranks read it themselves
    if (!c.readers.begin_blocking()) continue;
    const bool readable = c.socket.wait_readable(milliseconds(200), c.wake.get());
    c.readers.end_blocking();
    std::unique_lock<std::mutex> lock(c.read, std::try_to_lock);
    if (!lock.owns_lock()) continue;  // a rank is reading it
    if (!readable) {                  // a frame begun and then nothing for the timeout: the peer is stuck
      if (!c.in.idle() && std::chrono::steady_clock::now() - c.in.last_progress > o_.timeout) {
        if (!stopping_)
          close("data connection with process " + std::to_string(p) + " (" + c.socket.peer_name() +
                "): a frame stalled for " + std::to_string(o_.timeout.count()) + " ms");
        return;
      }
      continue;
    }
    if (auto st = pump(c, p); !st) {
      if (!stopping_)
        close("data connection with process " + std::to_string(p) + " (" + c.socket.peer_name() +
              "): " + st.error().message);
      return;
    }
  }
}

}  // namespace cohort::transport
