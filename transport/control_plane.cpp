// Control plane: the join handshake, the roster, heartbeats, loss detection and the small
// collectives, all as wire frames on one authenticated TCP connection per node.
#include "transport/control_plane.hpp"

#include <poll.h>
#include <unistd.h>

#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "transport/auth.hpp"
#include "transport/wire.hpp"

namespace cohort::transport {
namespace {

using clock = std::chrono::steady_clock;

enum kind : std::uint64_t { hello = 1, roster_list = 2, heartbeat = 3, text = 4, sum_part = 5, sum_total = 6, piece = 7, bye = 8, abort_job = 9, refuse = 10 };

std::uint64_t tag_of(kind k, std::uint64_t key = 0) { return (key << 8) | k; }
constexpr std::uint64_t small_payload = 1 << 20;  // every control frame but a parameter piece

// Integers, doubles and text travel as i32 tensors (the wire's dtypes), bit for bit.
tensor pack_words(const std::vector<std::uint32_t>& w) {
  tensor t = tensor::empty(shape{static_cast<std::int64_t>(w.size())}, dtype::i32);
  if (!w.empty()) std::memcpy(t.data<std::int32_t>(), w.data(), w.size() * 4);
  return t;
}
std::vector<std::uint32_t> words_of(const tensor& t) {
  std::vector<std::uint32_t> w(static_cast<std::size_t>(t.type() == dtype::i32 ? t.numel() : 0));
  if (!w.empty()) std::memcpy(w.data(), t.data<std::int32_t>(), w.size() * 4);
  return w;
}
tensor pack_ints(const std::vector<std::int64_t>& v) {
  std::vector<std::uint32_t> w;
  for (auto x : v) {
    w.push_back(static_cast<std::uint32_t>(static_cast<std::uint64_t>(x)));
    w.push_back(static_cast<std::uint32_t>(static_cast<std::uint64_t>(x) >> 32));
  }
  return pack_words(w);
}
std::vector<std::int64_t> ints_of(const tensor& t) {
  auto w = words_of(t);
  std::vector<std::int64_t> v;
  for (std::size_t i = 0; i + 1 < w.size(); i += 2)
    v.push_back(static_cast<std::int64_t>(std::uint64_t{w[i]} | (std::uint64_t{w[i + 1]} << 32)));
  return v;
}
tensor pack_doubles(const std::vector<double>& d) {
  std::vector<std::int64_t> v;
  for (double x : d) v.push_back(std::bit_cast<std::int64_t>(x));
  return pack_ints(v);
}
std::vector<double> doubles_of(const tensor& t) {
  std::vector<double> d;
  for (auto x : ints_of(t)) d.push_back(std::bit_cast<double>(x));
  return d;
}
tensor pack_text(const std::string& s) {
  std::vector<std::uint32_t> w((s.size() + 3) / 4 + 1, 0);
  w[0] = static_cast<std::uint32_t>(s.size());
  if (!s.empty()) std::memcpy(w.data() + 1, s.data(), s.size());
  return pack_words(w);
}
result<std::string> text_of(const tensor& t) {
  auto w = words_of(t);
  if (w.empty() || w[0] > (w.size() - 1) * 4) return make_error(errc::io_error, "control: malformed text message");
  return std::string(reinterpret_cast<const char*>(w.data() + 1), w[0]);
}

struct received {
  std::uint64_t tag = 0;
  std::uint32_t source = 0;
  tensor body;
};

// One whole frame from a stream; payloads over `max_payload` are refused before reading.
result<received> read_message(tcp_socket& s, std::uint64_t generation, std::uint64_t max_payload, milliseconds timeout,
                              bool check_generation = true) {
  std::byte head[frame_header_bytes];
  if (auto st = s.recv_exact(head, sizeof head, timeout); !st) return st.error();
  auto h = decode_frame_header(head, {.max_payload_bytes = std::uint64_t{1} << 32, .check_generation = check_generation,
                                      .expected_generation = generation});
  if (!h) return h.error();
  if ((h->meta.tag & 0xff) != piece && h->payload_bytes > max_payload)
    return make_error(errc::io_error, "control: a message of " + std::to_string(h->payload_bytes) + " bytes (the limit is " +
                                          std::to_string(max_payload) + ")");
  std::vector<std::byte> dims(static_cast<std::size_t>(h->rank) * 8);
  if (auto st = s.recv_exact(dims.data(), dims.size(), timeout); !st) return st.error();
  auto sh = decode_frame_shape(*h, dims);
  if (!sh) return sh.error();
  received r;
  r.tag = h->meta.tag;
  r.source = h->meta.source;
  r.body = tensor::empty(std::move(*sh), h->type);
  if (h->payload_bytes > 0)
    if (auto st = s.recv_exact(r.body.data<std::byte>(), h->payload_bytes, timeout); !st) return st.error();
  return r;
}

status write_message(tcp_socket& s, std::uint64_t generation, std::uint64_t tag, std::uint32_t source, const tensor& body,
                     milliseconds timeout) {
  const tensor c = body.is_contiguous() ? body : body.contiguous();
  auto prefix = encode_frame_prefix({.generation = generation, .tag = tag, .source = source}, c);
  const std::size_t payload = static_cast<std::size_t>(c.numel()) * size_of(c.type());
  return s.send_all(prefix.data(), prefix.size(), payload ? c.data<std::byte>() : nullptr, payload, timeout);
}

bool plausible_host(const std::string& h) {
  if (h.empty() || h.size() > 255) return false;
  for (char c : h)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':')) return false;
  return true;
}

std::string roster_text(const std::vector<node_entry>& r) {
  std::ostringstream out;
  for (const auto& n : r) out << n.process << ' ' << n.host << ' ' << n.data_port << ' ' << n.pid << ' ' << n.cores << '\n';
  return out.str();
}

result<std::vector<node_entry>> parse_roster(const std::string& text, int world) {
  std::istringstream in(text);
  std::vector<node_entry> r(static_cast<std::size_t>(world));
  std::vector<bool> seen(static_cast<std::size_t>(world), false);
  node_entry n;
  int count = 0;
  while (in >> n.process >> n.host >> n.data_port >> n.pid >> n.cores) {
    if (n.process < 0 || n.process >= world || seen[static_cast<std::size_t>(n.process)] || !plausible_host(n.host) ||
        n.data_port < 1 || n.data_port > 65535 || n.cores < 1 || n.cores > (1 << 16))
      return make_error(errc::io_error, "control: malformed roster entry for process " + std::to_string(n.process));
    seen[static_cast<std::size_t>(n.process)] = true;
    r[static_cast<std::size_t>(n.process)] = n;
    ++count;
  }
  if (count != world) return make_error(errc::io_error, "control: a roster of " + std::to_string(count) + " processes (expected " + std::to_string(world) + ")");
  return r;
}

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

struct control_plane::peer {
  tcp_socket socket;
  std::mutex write;
  std::string address;
  std::int64_t pid = 0;
  clock::time_point last_heard = clock::now();
  bool open = true;               // monitor thread only
  std::atomic<bool> said_bye{false};
};

std::string lost_node::describe() const {
  if (process < 0) return reason;  // relayed by the coordinator, which named the node
  char buf[160];
  std::snprintf(buf, sizeof buf, "; last heard from it %.2f s before", silent_s);
  std::string who = process == 0 ? "lost the coordinator (process 0, " : "lost node " + std::to_string(process) + " (";
  return who + "pid " + std::to_string(pid) + " at " + address + ") at step " + std::to_string(step) + ": " + reason + buf;
}

control_plane::control_plane(const control_options& o, int process) : o_(o), process_(process) {
  peers_.resize(static_cast<std::size_t>(o.world));
}

control_plane::~control_plane() {
  stopping_ = true;
  if (monitor_.joinable()) monitor_.join();
}

result<std::unique_ptr<control_plane>> control_plane::coordinate(const control_options& o, tcp_listener listener, int data_port) {
  if (o.world < 1) return make_error(errc::invalid_argument, "control: world size must be at least 1");
  std::unique_ptr<control_plane> cp(new control_plane(o, 0));
  cp->roster_.resize(static_cast<std::size_t>(o.world));
  cp->roster_[0] = {0, o.master_host, data_port, static_cast<std::int64_t>(::getpid()), o.cores};
  const auto deadline = clock::now() + o.join_timeout;
  int joined = 1;
  while (joined < o.world) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
    if (left.count() <= 0)
      return make_error(errc::timeout, "control: " + std::to_string(joined) + " of " + std::to_string(o.world) +
                                           " processes joined within " + std::to_string(o.join_timeout.count()) + " ms");
    auto s = listener.accept(left);
    if (!s) continue;
    auto refuse_node = [&](const std::string& why) {
      std::fprintf(stderr, "cohort: refused a node from %s: %s\n", s->peer_name().c_str(), why.c_str());
      (void)write_message(*s, o.generation, tag_of(refuse), 0, pack_text(why), o.auth_timeout);
    };
    if (auto st = authenticate_server(*s, o.secret, o.auth_timeout); !st) {
      std::fprintf(stderr, "cohort: refused a connection: %s\n", st.error().message.c_str());
      continue;
    }
    auto m = read_message(*s, o.generation, 64, o.auth_timeout);
    if (!m) {
      refuse_node(m.error().message);
      continue;
    }
    auto v = ints_of(m->body);
    if (m->tag != tag_of(hello) || v.size() != 5) {
      refuse_node("expected a hello");
      continue;
    }
    int want = static_cast<int>(v[0]);
    if (v[3] != o.world) {
      refuse_node("the node expects " + std::to_string(v[3]) + " processes; this job has " + std::to_string(o.world));
      continue;
    }
    if (want == -1)
      for (int p = 1; p < o.world && want == -1; ++p)
        if (!cp->peers_[static_cast<std::size_t>(p)]) want = p;
    if (want < 1 || want >= o.world || cp->peers_[static_cast<std::size_t>(want)]) {
      refuse_node("rank " + std::to_string(v[0]) + " is not free in a job of " + std::to_string(o.world));
      continue;
    }
    if (v[2] < 1 || v[2] > 65535 || v[4] < 1 || v[4] > (1 << 16)) {
      refuse_node("bad data port " + std::to_string(v[2]) + " or core count " + std::to_string(v[4]));
      continue;
    }
    auto p = std::make_unique<peer>();
    p->address = s->peer_name();
    p->pid = v[1];
    cp->roster_[static_cast<std::size_t>(want)] = {want, s->peer_host(), static_cast<int>(v[2]), v[1], static_cast<int>(v[4])};
    p->socket = std::move(*s);
    cp->peers_[static_cast<std::size_t>(want)] = std::move(p);
    ++joined;
  }
  listener.close();  // nobody joins a running job (yet)
  const std::string r = roster_text(cp->roster_);
  for (int p = 1; p < o.world; ++p) {
    auto& pe = *cp->peers_[static_cast<std::size_t>(p)];
    if (auto st = write_message(pe.socket, o.generation, tag_of(roster_list, static_cast<std::uint64_t>(p)), 0, pack_text(r), o.auth_timeout); !st)
      return make_error(st.error().code, "control: sending the roster to process " + std::to_string(p) + ": " + st.error().message);
    pe.last_heard = clock::now();
  }
  cp->start_monitor();
  return cp;
}

result<std::unique_ptr<control_plane>> control_plane::join(const control_options& o, int data_port) {
  if (o.world < 2) return make_error(errc::invalid_argument, "control: joining needs a world of at least 2 processes");
  if (o.process == 0 || o.process < -1 || o.process >= o.world)
    return make_error(errc::invalid_argument, "control: a node's rank must be in 1.." + std::to_string(o.world - 1) + " (or -1)");
  auto s = tcp_socket::connect(o.master_host, o.master_port, o.join_timeout);
  if (!s) return make_error(s.error().code, "control: joining " + o.master_host + ":" + std::to_string(o.master_port) + ": " + s.error().message);
  if (auto st = authenticate_client(*s, o.secret, o.auth_timeout); !st) return st.error();
  if (auto st = write_message(*s, o.generation, tag_of(hello), 0,
                              pack_ints({o.process, static_cast<std::int64_t>(::getpid()), data_port, o.world, o.cores}), o.auth_timeout);
      !st)
    return st.error();
  // a refusal is read whatever its generation (we may be the stale one)
  auto m = read_message(*s, o.generation, small_payload, o.join_timeout, /*check_generation=*/false);
  if (!m) return make_error(m.error().code, "control: waiting for the roster: " + m.error().message);
  auto body = text_of(m->body);
  if (!body) return body.error();
  if ((m->tag & 0xff) == refuse) return make_error(errc::invalid_argument, "control: the coordinator refused this node: " + *body);
  if ((m->tag & 0xff) != roster_list) return make_error(errc::io_error, "control: expected the roster");
  auto r = parse_roster(*body, o.world);
  if (!r) return r.error();
  const int me = static_cast<int>(m->tag >> 8);
  if (me < 1 || me >= o.world || (*r)[static_cast<std::size_t>(me)].pid != ::getpid())
    return make_error(errc::io_error, "control: the roster does not name this process");
  std::unique_ptr<control_plane> cp(new control_plane(o, me));
  cp->roster_ = std::move(*r);
  cp->roster_[0].host = o.master_host;  // the coordinator is where we reached it
  auto p = std::make_unique<peer>();
  p->address = s->peer_name();
  p->pid = cp->roster_[0].pid;
  p->socket = std::move(*s);
  cp->peers_[0] = std::move(p);
  cp->start_monitor();
  return cp;
}

void control_plane::start_monitor() {
  monitor_ = std::thread([this] { monitor(); });
}

void control_plane::monitor() {
  auto last_beat = clock::time_point{};
  while (!stopping_) {
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int p = 0; p < o_.world; ++p) {
      auto& pe = peers_[static_cast<std::size_t>(p)];
      if (pe && pe->open) {
        fds.push_back({pe->socket.fd(), POLLIN, 0});
        who.push_back(p);
      }
    }
    if (fds.empty()) return;
    ::poll(fds.data(), fds.size(), 50);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int p = who[i];
      auto& pe = *peers_[static_cast<std::size_t>(p)];
      auto m = read_message(pe.socket, o_.generation, small_payload, o_.heartbeat_timeout);
      if (!m) {
        pe.open = false;
        if (stopping_ || pe.said_bye) continue;
        declare_lost(p, m.error().code == errc::closed ? "connection closed without a goodbye (the process died or was killed)"
                                                       : m.error().message);
        continue;
      }
      pe.last_heard = clock::now();
      handle_frame(p, m->tag, {m->source, std::move(m->body)});
    }
    const auto now = clock::now();
    if (now - last_beat >= o_.heartbeat) {
      last_beat = now;
      for (int p = 0; p < o_.world; ++p) {
        auto& pe = peers_[static_cast<std::size_t>(p)];
        if (!pe || !pe->open || pe->said_bye) continue;
        if (now - pe->last_heard > o_.heartbeat_timeout) {
          pe->open = false;
          declare_lost(p, "no heartbeat for " + std::to_string(o_.heartbeat_timeout.count()) +
                              " ms (the process is stopped, hung or unreachable)");
          continue;
        }
        if (auto st = send(p, tag_of(heartbeat), tensor::empty(shape{0}, dtype::i32)); !st && !pe->said_bye) {
          pe->open = false;
          declare_lost(p, "heartbeat not delivered: " + st.error().message);
        }
      }
    }
  }
}

void control_plane::handle_frame(int p, std::uint64_t tag, message m) {
  auto& pe = *peers_[static_cast<std::size_t>(p)];
  switch (tag & 0xff) {
    case heartbeat:
      return;
    case bye: {
      {
        std::lock_guard<std::mutex> lock(mutex_);  // finish() waits on changed_ for it
        pe.said_bye = true;
      }
      changed_.notify_all();
      return;
    }
    case abort_job: {  // from the coordinator: another node was lost
      auto why = text_of(m.body);
      lost_node n;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (lost_) return;
        n.process = -1;
        n.reason = why ? *why : "the coordinator aborted the job";
        n.step = step_;
        lost_ = n;
      }
      changed_.notify_all();
      if (on_lost_) on_lost_(n);
      return;
    }
    case text:
    case sum_part:
    case sum_total:
    case piece: {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        inbox_[{p, tag}].push_back(std::move(m));
      }
      changed_.notify_all();
      return;
    }
    default:
      pe.open = false;
      declare_lost(p, "protocol violation: unexpected control message kind " + std::to_string(tag & 0xff));
  }
}

void control_plane::declare_lost(int p, const std::string& reason) {
  lost_node n;
  std::function<void(const lost_node&)> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_) return;
    const auto& pe = *peers_[static_cast<std::size_t>(p)];
    n.process = p;
    n.address = pe.address;
    n.pid = pe.pid;
    n.step = step_;
    n.reason = reason;
    n.silent_s = seconds(clock::now() - pe.last_heard);
    lost_ = n;
    callback = on_lost_;
  }
  changed_.notify_all();
  if (process_ == 0)  // tell the others, so they stop instead of waiting on the lost one
    for (int q = 1; q < o_.world; ++q)
      if (q != p && peers_[static_cast<std::size_t>(q)] && peers_[static_cast<std::size_t>(q)]->open)
        (void)send(q, tag_of(abort_job), pack_text("the coordinator aborted the job: " + n.describe()));
  if (callback) callback(n);
}

status control_plane::send(int p, std::uint64_t tag, const tensor& body) {
  auto& pe = peers_.at(static_cast<std::size_t>(p));
  if (!pe) return make_error(errc::invalid_argument, "control: no connection to process " + std::to_string(p));
  std::lock_guard<std::mutex> lock(pe->write);
  return write_message(pe->socket, o_.generation, tag, static_cast<std::uint32_t>(process_), body,
                       std::max(o_.heartbeat_timeout, milliseconds(1000)));
}

result<control_plane::message> control_plane::take(int p, std::uint64_t tag, milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto key = std::make_pair(p, tag);
  auto ready = [&] {
    auto it = inbox_.find(key);
    return it != inbox_.end() && !it->second.empty();
  };
  changed_.wait_for(lock, timeout, [&] { return ready() || lost_.has_value(); });
  if (!ready()) {
    if (lost_) return make_error(errc::closed, "control: " + (lost_->process == -1 ? lost_->reason : lost_->describe()));
    return make_error(errc::timeout, "control: process " + std::to_string(process_) + " waited " + std::to_string(timeout.count()) +
                                         " ms for process " + std::to_string(p));
  }
  auto it = inbox_.find(key);
  message m = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) inbox_.erase(it);
  return m;
}

result<std::string> control_plane::broadcast_text(std::uint64_t key, const std::string& t) {
  if (process_ == 0) {
    if (t.size() > small_payload - 8) return make_error(errc::invalid_argument, "control: text over 1 MiB");
    for (int p = 1; p < o_.world; ++p)
      if (auto st = send(p, tag_of(text, key), pack_text(t)); !st) return st.error();
    return t;
  }
  auto m = take(0, tag_of(text, key), o_.join_timeout);
  if (!m) return m.error();
  return text_of(m->body);
}

result<std::vector<std::string>> control_plane::all_gather_text(std::uint64_t key, const std::string& line) {
  if (line.find('\n') != std::string::npos || line.size() > (64u << 10))
    return make_error(errc::invalid_argument, "control: all_gather_text takes one line of at most 64 KiB");
  std::string joined;
  if (process_ != 0) {
    if (auto st = send(0, tag_of(text, key), pack_text(line)); !st) return st.error();
  } else {
    joined = line + "\n";
    for (int p = 1; p < o_.world; ++p) {
      auto m = take(p, tag_of(text, key), o_.join_timeout);
      if (!m) return m.error();
      auto t = text_of(m->body);
      if (!t) return t.error();
      if (t->find('\n') != std::string::npos) return make_error(errc::io_error, "control: process " + std::to_string(p) + " sent several lines");
      joined += *t + "\n";
    }
  }
  auto all = broadcast_text(key + 1, joined);
  if (!all) return all.error();
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = all->find('\n', start)) != std::string::npos; start = nl + 1) lines.push_back(all->substr(start, nl - start));
  if (static_cast<int>(lines.size()) != o_.world)
    return make_error(errc::io_error, "control: " + std::to_string(lines.size()) + " lines for " + std::to_string(o_.world) + " processes");
  return lines;
}

result<std::vector<double>> control_plane::sum(std::uint64_t key, const std::vector<double>& values) {
  if (process_ != 0) {
    if (auto st = send(0, tag_of(sum_part, key), pack_doubles(values)); !st) return st.error();
    auto m = take(0, tag_of(sum_total, key), o_.join_timeout);
    if (!m) return m.error();
    auto total = doubles_of(m->body);
    if (total.size() != values.size()) return make_error(errc::io_error, "control: a sum of the wrong length");
    return total;
  }
  std::vector<double> total = values;
  for (int p = 1; p < o_.world; ++p) {
    auto m = take(p, tag_of(sum_part, key), o_.join_timeout);
    if (!m) return m.error();
    auto part = doubles_of(m->body);
    if (part.size() != values.size())
      return make_error(errc::io_error, "control: process " + std::to_string(p) + " sent " + std::to_string(part.size()) +
                                            " values to a sum of " + std::to_string(values.size()));
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += part[i];
  }
  for (int p = 1; p < o_.world; ++p)
    if (auto st = send(p, tag_of(sum_total, key), pack_doubles(total)); !st) return st.error();
  return total;
}

result<std::vector<tensor>> control_plane::gather(std::uint64_t key, const std::vector<std::pair<int, tensor>>& mine,
                                                  const std::vector<int>& owner) {
  if (process_ != 0) {
    for (const auto& [index, t] : mine) {
      auto& pe = peers_[0];
      const tensor c = t.is_contiguous() ? t : t.contiguous();
      std::lock_guard<std::mutex> lock(pe->write);
      if (auto st = write_message(pe->socket, o_.generation, tag_of(piece, key), static_cast<std::uint32_t>(index), c, o_.join_timeout); !st)
        return st.error();
    }
    return std::vector<tensor>{};
  }
  std::vector<tensor> all(owner.size());
  std::vector<bool> have(owner.size(), false);
  for (const auto& [index, t] : mine) {
    if (index < 0 || static_cast<std::size_t>(index) >= owner.size()) return make_error(errc::invalid_argument, "gather: bad index");
    all[static_cast<std::size_t>(index)] = t;
    have[static_cast<std::size_t>(index)] = true;
  }
  for (std::size_t i = 0; i < owner.size(); ++i) {
    if (owner[i] == 0) continue;
    auto m = take(owner[i], tag_of(piece, key), o_.join_timeout);
    if (!m) return m.error();
    const std::size_t index = m->source;
    if (index >= owner.size() || owner[index] != owner[i] || have[index])
      return make_error(errc::io_error, "control: process " + std::to_string(owner[i]) + " sent piece " + std::to_string(index) +
                                            ", which is not its to send");
    all[index] = std::move(m->body);
    have[index] = true;
  }
  for (std::size_t i = 0; i < owner.size(); ++i)
    if (!have[i]) return make_error(errc::invalid_argument, "gather: nobody holds piece " + std::to_string(i));
  return all;
}

void control_plane::on_lost(std::function<void(const lost_node&)> fn) {
  std::optional<lost_node> already;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    on_lost_ = fn;
    already = lost_;
  }
  if (already && fn) fn(*already);
}

std::optional<lost_node> control_plane::lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

std::optional<lost_node> control_plane::wait_lost(milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return lost_.has_value(); });
  return lost_;
}

status control_plane::finish(milliseconds timeout) {
  if (auto l = lost(); l) return make_error(errc::closed, l->describe());
  if (process_ != 0) {
    if (auto st = send(0, tag_of(bye), tensor::empty(shape{0}, dtype::i32)); !st) return st;
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return peers_[0]->said_bye || lost_.has_value(); });
  } else {
    auto all_left = [&] {
      for (int p = 1; p < o_.world; ++p)
        if (!peers_[static_cast<std::size_t>(p)]->said_bye) return false;
      return true;
    };
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait_for(lock, timeout, [&] { return all_left() || lost_.has_value(); });
    }
    for (int p = 1; p < o_.world; ++p) (void)send(p, tag_of(bye), tensor::empty(shape{0}, dtype::i32));
  }
  stopping_ = true;
  if (monitor_.joinable()) monitor_.join();
  if (auto l = lost(); l) return make_error(errc::closed, l->describe());
  return {};
}

}  // namespace cohort::transport
