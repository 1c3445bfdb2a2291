// The control plane's message codec: packing bodies, the roster's text, bounded frame I/O.
#include "transport/control_codec.hpp"

#include <bit>
#include <cctype>
#include <cstdlib>
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

tensor pack_hello(const hello& h) {
  return pack_ints({h.process, h.pid, h.data_port, h.world, h.cores, h.standby_port});
}

result<hello> hello_of(std::uint64_t tag, const tensor& body) {
  auto v = ints_of(body);
  if (tag != tag_of(kind::hello) || v.size() != 6) return make_error(errc::io_error, "expected a hello");
  return hello{v[0], v[1], v[2], v[3], v[4], v[5]};
}

std::string roster_text(const std::vector<node_entry>& r) {
  std::ostringstream out;
  for (const auto& n : r)
    if (n.pid == 0)  // a slot nobody has taken yet
      out << n.process << " - 0 0 0 0\n";
    else
      out << n.process << ' ' << n.host << ' ' << n.data_port << ' ' << n.pid << ' ' << n.cores << ' ' << n.standby_port
          << '\n';
  return out.str();
}

result<std::vector<node_entry>> parse_roster(const std::string& text, int world) {
  if (world < 1 || world > max_world)
    return make_error(errc::io_error, "control: a roster of " + std::to_string(world) + " processes");
  std::istringstream in(text);
  std::vector<node_entry> r(static_cast<std::size_t>(world));
  std::vector<bool> seen(static_cast<std::size_t>(world), false);
  node_entry n;
  int count = 0;
  while (in >> n.process >> n.host >> n.data_port >> n.pid >> n.cores >> n.standby_port) {
    const bool slot_in_range = n.process >= 0 && n.process < world && !seen[static_cast<std::size_t>(n.process)];
    const bool empty_slot =
        n.host == "-" && n.data_port == 0 && n.pid == 0 && n.cores == 0 && n.standby_port == 0 && n.process != 0;
    if (!slot_in_range ||
        (!empty_slot && (!plausible_host(n.host) || n.data_port < 1 || n.data_port > 65535 || n.pid <= 0 ||
                         n.cores < 1 || n.cores > (1 << 16) || n.standby_port < 0 || n.standby_port > 65535)))
      return make_error(errc::io_error, "control: malformed roster entry for process " + std::to_string(n.process));
    seen[static_cast<std::size_t>(n.process)] = true;
    if (empty_slot) n = node_entry{n.process, "", 0, 0, 0, 0};
    r[static_cast<std::size_t>(n.process)] = n;
    ++count;
  }
  if (count != world)
    return make_error(errc::io_error, "control: a roster of " + std::to_string(count) + " processes (expected " +
                                          std::to_string(world) + ")");
  return r;
}

result<std::vector<node_entry>> parse_roster(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n' ? 1 : 0;
  if (lines < 2 || lines > max_world)
    return make_error(errc::io_error, "control: a roster of " + std::to_string(lines) + " lines");
  return parse_roster(text, lines);
}

std::string membership_text(const membership& m) {
  std::string out = "epoch " + std::to_string(m.epoch) + " live";
  for (bool l : m.live) out += l ? " 1" : " 0";
  out += " replaced";
  for (int p : m.replaced) out += " " + std::to_string(p);
  out += " joined";
  for (int p : m.joined) out += " " + std::to_string(p);
  if (m.leader != 0) out += " leader " + std::to_string(m.leader);  // after a succession
  return out;
}

result<membership> parse_membership(const std::string& text, int world) {
  const auto malformed = make_error(errc::io_error, "control: a malformed membership '" + text.substr(0, 200) + "'");
  std::istringstream in(text);
  membership m;
  std::string word;
  long long epoch = -1;
  if (!(in >> word) || word != "epoch" || !(in >> epoch) || epoch < 0 || !(in >> word) || word != "live")
    return malformed;
  m.epoch = static_cast<std::uint64_t>(epoch);
  for (int p = 0; p < world; ++p) {
    int flag = -1;
    if (!(in >> flag) || (flag != 0 && flag != 1)) return malformed;
    m.live.push_back(flag == 1);
  }
  if (!(in >> word) || word != "replaced") return malformed;
  std::vector<int>* list = &m.replaced;
  bool leader = false;
  while (in >> word) {
    if (word == "joined" && list == &m.replaced) {
      list = &m.joined;
      continue;
    }
    if (word == "leader" && list == &m.joined && !leader) {
      if (!(in >> m.leader) || m.leader < 1 || m.leader >= world) return malformed;
      leader = true;
      continue;
    }
    if (leader) return malformed;  // nothing after the leader
    char* end = nullptr;
    const long p = std::strtol(word.c_str(), &end, 10);
    if (end == word.c_str() || *end != 0 || p < 1 || p >= world) return malformed;
    list->push_back(static_cast<int>(p));
  }
  if (list != &m.joined || !m.live[static_cast<std::size_t>(m.leader)]) return malformed;
  return m;
}

std::string joined_text(std::uint64_t epoch, const std::vector<joined_entry>& batch) {
  std::string out = std::to_string(epoch) + " " + std::to_string(batch.size());
  for (const auto& j : batch)
    out += " " + std::to_string(j.node.process) + " " + (j.replacement ? "r" : "j") + " " + j.node.host + " " +
           std::to_string(j.node.data_port) + " " + std::to_string(j.node.pid) + " " + std::to_string(j.node.cores) +
           " " + std::to_string(j.node.standby_port);
  return out;
}

result<std::pair<std::uint64_t, std::vector<joined_entry>>> parse_joined(const std::string& text, int world) {
  const auto malformed = make_error(errc::io_error, "control: a malformed admission '" + text.substr(0, 200) + "'");
  std::istringstream in(text);
  long long epoch = -1, count = -1;
  if (!(in >> epoch >> count) || epoch < 1 || count < 0 || count >= world) return malformed;
  std::vector<joined_entry> batch;
  std::vector<bool> seen(static_cast<std::size_t>(world), false);
  for (long long i = 0; i < count; ++i) {
    joined_entry j;
    std::string how;
    if (!(in >> j.node.process >> how >> j.node.host >> j.node.data_port >> j.node.pid >> j.node.cores >>
          j.node.standby_port))
      return malformed;
    if (j.node.process < 1 || j.node.process >= world || seen[static_cast<std::size_t>(j.node.process)] ||
        (how != "r" && how != "j") || !plausible_host(j.node.host) || j.node.data_port < 1 ||
        j.node.data_port > 65535 || j.node.pid <= 0 || j.node.cores < 1 || j.node.cores > (1 << 16) ||
        j.node.standby_port < 0 || j.node.standby_port > 65535)
      return malformed;
    seen[static_cast<std::size_t>(j.node.process)] = true;
    j.replacement = how == "r";
    batch.push_back(std::move(j));
  }
  std::string rest;
  if (in >> rest) return malformed;
  return std::make_pair(static_cast<std::uint64_t>(epoch), std::move(batch));
}

std::string succession_text(const succession& s) {
  std::string out = std::to_string(s.epoch) + " " + std::to_string(s.leader) + " " + std::to_string(s.lost.size());
  for (int p : s.lost) out += " " + std::to_string(p);
  return out + " " + s.report;
}

result<succession> parse_succession(const std::string& text, int world) {
  const auto malformed = make_error(errc::io_error, "control: a malformed succession '" + text.substr(0, 200) + "'");
  std::istringstream in(text);
  long long epoch = -1, leader = -1, count = -1;
  if (!(in >> epoch >> leader >> count) || epoch < 1 || leader < 0 || leader >= world || count < 1 || count >= world)
    return malformed;
  succession s;
  s.epoch = static_cast<std::uint64_t>(epoch);
  s.leader = static_cast<int>(leader);
  std::vector<bool> seen(static_cast<std::size_t>(world), false);
  seen[static_cast<std::size_t>(leader)] = true;
  for (long long i = 0; i < count; ++i) {
    long long p = -1;
    if (!(in >> p) || p < 0 || p >= world || seen[static_cast<std::size_t>(p)]) return malformed;
    seen[static_cast<std::size_t>(p)] = true;
    s.lost.push_back(static_cast<int>(p));
  }
  std::getline(in >> std::ws, s.report);
  return s;
}

std::string standby_text(const std::vector<standby_address>& order) {
  std::string out;
  for (const auto& a : order) out += a.host + " " + std::to_string(a.port) + "\n";
  return out;
}

result<std::vector<standby_address>> parse_standbys(const std::string& text) {
  std::vector<standby_address> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    standby_address a;
    long long port = -1;
    std::string rest;
    if (!(words >> a.host >> port) || (words >> rest) || !plausible_host(a.host) || port < 1 || port > 65535 ||
        out.size() >= static_cast<std::size_t>(max_world))
      return make_error(errc::io_error, "control: a malformed standby address '" + line.substr(0, 200) + "' (line " +
                                            std::to_string(out.size() + 1) + ")");
    a.port = static_cast<int>(port);
    out.push_back(std::move(a));
  }
  return out;
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
