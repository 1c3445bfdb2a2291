// The control plane's message codec: packing bodies, the roster's text, bounded frame I/O.
#include "transport/control_codec.hpp"

#include <bit>
#include <cctype>
#include <cstring>
#include <sstream>

#include "transport/wire.hpp"

namespace cohort::transport::control {
namespace {

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

bool plausible_host(const std::string& h) {
  if (h.empty() || h.size() > 255) return false;
  for (char c : h)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':')) return false;
  return true;
}

}  // namespace

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

tensor pack_hello(const hello& h) { return pack_ints({h.process, h.pid, h.data_port, h.world, h.cores}); }

result<hello> hello_of(std::uint64_t tag, const tensor& body) {
  auto v = ints_of(body);
  if (tag != tag_of(kind::hello) || v.size() != 5) return make_error(errc::io_error, "expected a hello");
  return hello{v[0], v[1], v[2], v[3], v[4]};
}

std::string roster_text(const std::vector<node_entry>& r) {
  std::ostringstream out;
  for (const auto& n : r)
    out << n.process << ' ' << n.host << ' ' << n.data_port << ' ' << n.pid << ' ' << n.cores << '\n';
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
  if (count != world)
    return make_error(errc::io_error, "control: a roster of " + std::to_string(count) + " processes (expected " +
                                          std::to_string(world) + ")");
  return r;
}

result<message> read_message(tcp_socket& s, std::uint64_t generation, std::uint64_t max_payload, milliseconds timeout,
                             bool check_generation) {
  std::byte head[frame_header_bytes];
  if (auto st = s.recv_exact(head, sizeof head, timeout); !st) return st.error();
  auto h = decode_frame_header(head, {.max_payload_bytes = std::uint64_t{1} << 32,
                                      .check_generation = check_generation,
                                      .expected_generation = generation});
  if (!h) return h.error();
  if (!is(h->meta.tag, kind::piece) && h->payload_bytes > max_payload)
    return make_error(errc::io_error, "control: a message of " + std::to_string(h->payload_bytes) +
                                          " bytes (the limit is " + std::to_string(max_payload) + ")");
  std::vector<std::byte> dims(static_cast<std::size_t>(h->rank) * 8);
  if (auto st = s.recv_exact(dims.data(), dims.size(), timeout); !st) return st.error();
  auto sh = decode_frame_shape(*h, dims);
  if (!sh) return sh.error();
  message m;
  m.tag = h->meta.tag;
  m.source = h->meta.source;
  m.body = tensor::empty(std::move(*sh), h->type);
  if (h->payload_bytes > 0)
    if (auto st = s.recv_exact(m.body.data<std::byte>(), h->payload_bytes, timeout); !st) return st.error();
  return m;
}

status write_message(tcp_socket& s, std::uint64_t generation, std::uint64_t tag, std::uint32_t source,
                     const tensor& body, milliseconds timeout) {
  const tensor c = body.is_contiguous() ? body : body.contiguous();
  auto prefix = encode_frame_prefix({.generation = generation, .tag = tag, .source = source}, c);
  const std::size_t payload = static_cast<std::size_t>(c.numel()) * size_of(c.type());
  return s.send_all(prefix.data(), prefix.size(), payload ? c.data<std::byte>() : nullptr, payload, timeout);
}

}  // namespace cohort::transport::control
