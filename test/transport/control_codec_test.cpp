// The control plane's message codec (transport/control_codec.hpp), over a loopback socket
// pair, with no control plane running: every message kind round-trips (tag, key, source,
// body, decoded back to what was packed, doubles bit for bit); frames over the size limit,
// cut short, with a bad magic or a stale generation are refused with the reason; bodies
// that lie about their length and hellos of the wrong shape are refused; the roster's text
// round-trips and every kind of bad entry is refused.
#include <doctest/doctest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "transport/control_codec.hpp"
#include "transport/wire.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace cohort::transport::control;
using namespace std::chrono_literals;

namespace {

struct socket_pair {
  tcp_socket writer, reader;
};

socket_pair connected() {
  auto l = tcp_listener::open("127.0.0.1", 0).value();
  auto w = tcp_socket::connect("127.0.0.1", l.port(), 5s).value();
  auto r = l.accept(5s).value();
  return {std::move(w), std::move(r)};
}

constexpr std::uint64_t generation = 7;

// Writes one message and reads it back on the other end.
message round_trip(kind k, std::uint64_t key, std::uint32_t source, const tensor& body) {
  auto s = connected();
  REQUIRE(write_message(s.writer, generation, tag_of(k, key), source, body, 5s).ok());
  auto m = read_message(s.reader, generation, small_payload, 5s);
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  CHECK(is(m->tag, k));
  CHECK(key_of(m->tag) == key);
  CHECK(m->source == source);
  return std::move(*m);
}

// The error of reading what `bytes` holds, then the writer closing.
error read_error(const std::vector<std::byte>& bytes, std::uint64_t max_payload = small_payload,
                 bool check_generation = true) {
  auto s = connected();
  REQUIRE(s.writer.send_all(bytes.data(), bytes.size(), 5s).ok());
  s.writer = tcp_socket();  // closed
  auto m = read_message(s.reader, generation, max_payload, 5s, check_generation);
  REQUIRE_FALSE(m.ok());
  return m.error();
}

std::vector<std::byte> frame_bytes(std::uint64_t gen, std::uint64_t tag, const tensor& body) {
  return encode_frame({.generation = gen, .tag = tag}, body);
}

}  // namespace

TEST_CASE("every control message kind round-trips through a frame with its tag, key, source and body") {
  SUBCASE("hello") {
    const hello h{.process = -1, .pid = 4242, .data_port = 29501, .world = 4, .cores = 16};
    auto m = round_trip(kind::hello, 0, 0, pack_hello(h));
    auto back = hello_of(m.tag, m.body);
    REQUIRE(back.ok());
    CHECK(back->process == -1);
    CHECK(back->pid == 4242);
    CHECK(back->data_port == 29501);
    CHECK(back->world == 4);
    CHECK(back->cores == 16);
  }
  SUBCASE("roster") {
    const std::vector<node_entry> r = {
        {0, "10.0.0.1", 4000, 11, 8}, {1, "host-b.example", 4001, 12, 1}, {2, "::1", 65535, 13, 65536}};
    auto m = round_trip(kind::roster, 2, 0, pack_text(roster_text(r)));
    auto text = text_of(m.body);
    REQUIRE(text.ok());
    auto back = parse_roster(*text, 3);
    REQUIRE(back.ok());
    for (std::size_t i = 0; i < r.size(); ++i) {
      CAPTURE(i);
      CHECK((*back)[i].process == r[i].process);
      CHECK((*back)[i].host == r[i].host);
      CHECK((*back)[i].data_port == r[i].data_port);
      CHECK((*back)[i].pid == r[i].pid);
      CHECK((*back)[i].cores == r[i].cores);
    }
  }
  SUBCASE("text, refuse and abort_job carry any bytes of any length") {
    std::string binary("a\0b\xff\n", 5);
    for (kind k : {kind::text, kind::refuse, kind::abort_job})
      for (const std::string& s : {std::string(), std::string("x"), std::string("abc"), std::string("abcd"), binary}) {
        CAPTURE(static_cast<int>(k));
        CAPTURE(s.size());
        auto m = round_trip(k, 3, 1, pack_text(s));
        auto back = text_of(m.body);
        REQUIRE(back.ok());
        CHECK(*back == s);
      }
  }
  SUBCASE("heartbeat and bye are empty") {
    for (kind k : {kind::heartbeat, kind::bye}) {
      auto m = round_trip(k, 0, 2, tensor::empty(shape{0}, dtype::i32));
      CHECK(m.body.numel() == 0);
      CHECK(m.body.type() == dtype::i32);
    }
  }
  SUBCASE("sum_part and sum_total carry doubles bit for bit") {
    const std::vector<double> d = {0.25,
                                   -0.0,
                                   std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::denorm_min(),
                                   1e308,
                                   -3.0};
    for (kind k : {kind::sum_part, kind::sum_total}) {
      auto back = doubles_of(round_trip(k, std::uint64_t{1} << 40, 3, pack_doubles(d)).body);
      REQUIRE(back.size() == d.size());
      for (std::size_t i = 0; i < d.size(); ++i)
        CHECK(std::bit_cast<std::uint64_t>(back[i]) == std::bit_cast<std::uint64_t>(d[i]));
    }
  }
  SUBCASE("a piece is any tensor, its index in the source field, and may exceed the small limit") {
    tensor t = tensor::empty({2, 3});
    for (std::int64_t j = 0; j < 6; ++j) t.data<float>()[j] = 0.5f * static_cast<float>(j);
    auto m = round_trip(kind::piece, 9, 5, t.transpose(0, 1));  // a view: sent in its logical order
    REQUIRE(m.body.shape() == shape{3, 2});
    CHECK(m.body.type() == dtype::f32);
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 2; ++j) CHECK(m.body.data<float>()[i * 2 + j] == t.data<float>()[j * 3 + i]);
    auto big = round_trip(kind::piece, 9, 0, tensor::zeros({(1 << 18) + 1}));  // 1 MiB + 4 bytes
    CHECK(big.body.numel() == (1 << 18) + 1);
  }
}

TEST_CASE("integers round-trip through two words each, and odd or foreign bodies decode to nothing extra") {
  const std::vector<std::int64_t> v = {0, -1, std::numeric_limits<std::int64_t>::min(),
                                       std::numeric_limits<std::int64_t>::max(), 1ll << 33};
  CHECK(ints_of(pack_ints(v)) == v);
  tensor odd = tensor::empty(shape{3}, dtype::i32);
  odd.data<std::int32_t>()[0] = 5;
  odd.data<std::int32_t>()[1] = 0;
  odd.data<std::int32_t>()[2] = 9;
  CHECK(ints_of(odd) == std::vector<std::int64_t>{5});  // the trailing word is ignored
  CHECK(ints_of(tensor::zeros({4})).empty());           // f32: not a control body
}

TEST_CASE("a control frame over the size limit is refused before its payload is read, naming the sizes") {
  auto e = read_error(frame_bytes(generation, tag_of(kind::text), pack_text(std::string(small_payload, 'x'))));
  CHECK(e.code == errc::io_error);
  CHECK(e.message == "control: a message of " + std::to_string(small_payload + 4) + " bytes (the limit is 1048576)");
  auto hello_sized = read_error(frame_bytes(generation, tag_of(kind::hello), pack_ints({1, 2, 3, 4, 5, 6})), 40);
  CHECK(hello_sized.message == "control: a message of 48 bytes (the limit is 40)");
}

TEST_CASE("a control frame cut short is refused: closed inside the header, the shape or the payload") {
  const auto whole = frame_bytes(generation, tag_of(kind::text), pack_text("twelve bytes"));
  for (std::size_t cut : {std::size_t{0}, std::size_t{20}, frame_header_bytes + 4, whole.size() - 1}) {
    CAPTURE(cut);
    auto e = read_error(std::vector<std::byte>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut)));
    CHECK(e.code == errc::closed);
  }
  // a peer that stops mid-frame without closing: a timeout, not a hang
  auto s = connected();
  REQUIRE(s.writer.send_all(whole.data(), whole.size() - 3, 5s).ok());
  auto m = read_message(s.reader, generation, small_payload, 100ms);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == errc::timeout);
}

TEST_CASE("a bad magic or a stale generation is refused with the reason, the generation only when checked") {
  auto bad = frame_bytes(generation, tag_of(kind::bye), tensor::empty(shape{0}, dtype::i32));
  bad[0] = std::byte{0};
  auto e = read_error(bad);
  CHECK(e.code == errc::io_error);
  CHECK(e.message.find("frame: bad magic") == 0);

  const auto stale = frame_bytes(generation - 1, tag_of(kind::refuse), pack_text("old job"));
  auto old = read_error(stale);
  CHECK(old.code == errc::closed);
  CHECK(old.message == "frame: stale generation 6 (the job is at 7)");
  auto s = connected();  // a refusal is read whatever its generation
  REQUIRE(s.writer.send_all(stale.data(), stale.size(), 5s).ok());
  auto m = read_message(s.reader, generation, small_payload, 5s, /*check_generation=*/false);
  REQUIRE(m.ok());
  CHECK(text_of(m->body).value() == "old job");
}

TEST_CASE("a text body that claims more bytes than it holds, or is no i32 tensor, is refused") {
  tensor lying = tensor::empty(shape{2}, dtype::i32);
  lying.data<std::int32_t>()[0] = 5;  // five bytes, but only four follow
  lying.data<std::int32_t>()[1] = 0;
  for (const tensor& t : {lying, tensor::empty(shape{0}, dtype::i32), tensor::zeros({3})}) {
    auto r = text_of(t);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "control: malformed text message");
  }
}

TEST_CASE("a hello is six integers under the hello tag, and nothing else is taken for one") {
  const tensor six = pack_hello({.process = 1, .pid = 2, .data_port = 3, .world = 4, .cores = 5, .standby_port = 6});
  CHECK(hello_of(tag_of(kind::hello), six).ok());
  CHECK(hello_of(tag_of(kind::hello), six)->standby_port == 6);
  for (auto [tag, body] : {std::pair{tag_of(kind::text), six}, std::pair{tag_of(kind::hello, 1), six},
                           std::pair{tag_of(kind::hello), pack_ints({1, 2, 3, 4, 5})},
                           std::pair{tag_of(kind::hello), pack_text("hello")}}) {
    auto h = hello_of(tag, body);
    REQUIRE_FALSE(h.ok());
    CHECK(h.error().message == "expected a hello");
  }
  // an unknown kind code is none of the kinds
  for (int k = 1; k <= 17; ++k) CHECK_FALSE(is(0x2a, static_cast<kind>(k)));
}

TEST_CASE("roster text: every bad entry and a short roster are refused, naming the process") {
  const std::string good = "0 a 1 10 1 0\n1 b 2 11 1 4000\n";
  CHECK(parse_roster(good, 2).ok());
  CHECK(parse_roster(good, 2)->at(1).standby_port == 4000);
  const std::pair<std::string, std::string> bad[] = {
      {"0 a 1 10 1 0\n", "control: a roster of 1 processes (expected 2)"},
      {"0 a 1 10 1 0\n1 b 2 11 1 0\n1 c 3 12 1 0\n", "control: malformed roster entry for process 1"},  // repeated
      {"0 a 1 10 1 0\n2 b 2 11 1 0\n", "control: malformed roster entry for process 2"},                // out of range
      {"0 a 1 10 1 0\n-1 b 2 11 1 0\n", "control: malformed roster entry for process -1"},
      {"0 a 1 10 1 0\n1 b/c 2 11 1 0\n", "control: malformed roster entry for process 1"},  // a host with '/'
      {"0 a 0 10 1 0\n1 b 2 11 1 0\n", "control: malformed roster entry for process 0"},    // port 0
      {"0 a 65536 10 1 0\n1 b 2 11 1 0\n", "control: malformed roster entry for process 0"},
      {"0 a 1 10 0 0\n1 b 2 11 1 0\n", "control: malformed roster entry for process 0"},  // no cores
      {"0 a 1 10 65537 0\n1 b 2 11 1 0\n", "control: malformed roster entry for process 0"},
      {"0 a 1 10 1 0\n1 b 2 11 1 65536\n", "control: malformed roster entry for process 1"},  // standby port
      {"0 a 1 10 1 0\n1 b 2 11 1 -1\n", "control: malformed roster entry for process 1"},
      {"0 a 1 10 1 0\n1 b two 11 1 0\n",
       "control: a roster of 1 processes (expected 2)"},                              // not a number: parsing stops
      {"0 a 1 10 1\n1 b 2 11 1\n", "control: a roster of 1 processes (expected 2)"},  // five fields: the old format
      {"", "control: a roster of 0 processes (expected 2)"},
  };
  for (const auto& [text, why] : bad) {
    CAPTURE(text);
    auto r = parse_roster(text, 2);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == errc::io_error);
    CHECK(r.error().message == why);
  }
  CHECK_FALSE(
      parse_roster("0 " + std::string(256, 'h') + " 1 10 1 0\n1 b 2 11 1 0\n", 2).ok());  // a host over 255 characters
}

TEST_CASE("a roster with empty slots round-trips and sizes itself, an empty slot 0 or a half-empty entry is refused") {
  std::vector<node_entry> r{{0, "a", 1, 10, 2, 0}, {1, "b", 2, 11, 1, 7}, {2, "", 0, 0, 0, 0}};
  const std::string text = roster_text(r);
  CHECK(text == "0 a 1 10 2 0\n1 b 2 11 1 7\n2 - 0 0 0 0\n");
  auto back = parse_roster(text);  // a process joining the running job learns the size here
  REQUIRE(back);
  REQUIRE(back->size() == 3);
  CHECK((*back)[2].pid == 0);
  CHECK((*back)[2].host.empty());
  CHECK((*back)[1].host == "b");
  CHECK((*back)[1].standby_port == 7);
  CHECK(parse_roster("0 - 0 0 0 0\n1 b 2 11 1 0\n", 2).error().message ==
        "control: malformed roster entry for process 0");
  CHECK(parse_roster("0 a 1 10 1 0\n1 - 2 0 0 0\n", 2).error().message ==
        "control: malformed roster entry for process 1");
  CHECK(parse_roster("0 a 1 10 1 0\n1 b 2 0 1 0\n", 2).error().message ==
        "control: malformed roster entry for process 1");
  CHECK(parse_roster("0 a 1 10 1 0\n").error().message == "control: a roster of 1 lines");
}

TEST_CASE("a succession round-trips, and every malformed one is refused") {
  succession s{.epoch = 5, .leader = 1, .lost = {0, 3}, .report = "lost the coordinator (process 0, pid 7)"};
  const std::string text = succession_text(s);
  CHECK(text == "5 1 2 0 3 lost the coordinator (process 0, pid 7)");
  auto back = parse_succession(text, 4);
  REQUIRE(back);
  CHECK(back->epoch == 5);
  CHECK(back->leader == 1);
  CHECK(back->lost == std::vector<int>{0, 3});
  CHECK(back->report == s.report);
  for (const std::string bad : {"", "0 1 1 0 r", "5 4 1 0 r", "5 1 0 r", "5 1 1 1 r", "5 1 2 0 0 r", "5 1 1 4 r",
                                "5 1 4 0 2 3 r", "5 -1 1 0 r", "5 1 2 0 x"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_succession(bad, 4).ok());
  }
}

TEST_CASE("the standby order a waiting process is told round-trips, and every malformed line is refused") {
  const std::vector<standby_address> order = {{"127.0.0.1", 40771}, {"node7.example", 1}, {"::1", 65535}};
  const std::string text = standby_text(order);
  CHECK(text == "127.0.0.1 40771\nnode7.example 1\n::1 65535\n");
  auto back = parse_standbys(text);
  REQUIRE(back);
  REQUIRE(back->size() == 3);
  CHECK((*back)[0].host == "127.0.0.1");
  CHECK((*back)[0].port == 40771);
  CHECK((*back)[2].host == "::1");
  CHECK((*back)[2].port == 65535);
  REQUIRE(parse_standbys(""));
  CHECK(parse_standbys("")->empty());  // a coordinator alone in its job
  for (const std::string bad : {"127.0.0.1 0\n", "127.0.0.1 65536\n", "127.0.0.1\n", "127.0.0.1 80 9\n", "a;b 80\n",
                                "127.0.0.1 -5\n", "h 80\n\n", "127.0.0.1 x\n"}) {
    CAPTURE(bad);
    auto r = parse_standbys(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("standby address") != std::string::npos);
  }
  std::string many;
  for (int i = 0; i <= max_world; ++i) many += "h 80\n";
  CHECK_FALSE(parse_standbys(many).ok());
}

TEST_CASE("a membership and an admission round-trip, and every malformed one is refused") {
  membership m;
  m.epoch = 4;
  m.live = {true, true, false, true};
  m.replaced = {2};
  m.joined = {3, 1};
  const std::string text = membership_text(m);
  CHECK(text == "epoch 4 live 1 1 0 1 replaced 2 joined 3 1");
  auto back = parse_membership(text, 4);
  REQUIRE(back);
  CHECK(back->epoch == 4);
  CHECK(back->live == m.live);
  CHECK(back->replaced == m.replaced);
  CHECK(back->joined == m.joined);
  CHECK(back->leader == 0);
  // after a succession the coordinator is named (process 0 lost, process 1 leads)
  m.live = {false, true, false, true};
  m.leader = 1;
  CHECK(membership_text(m) == "epoch 4 live 0 1 0 1 replaced 2 joined 3 1 leader 1");
  auto led = parse_membership(membership_text(m), 4);
  REQUIRE(led);
  CHECK(led->leader == 1);
  CHECK(led->joined == m.joined);
  for (const std::string bad :
       {"epoch 4 live 0 1 0 1 replaced joined leader 2", "epoch 4 live 0 1 0 1 replaced joined leader 0",
        "epoch 4 live 0 1 0 1 replaced joined leader 4", "epoch 4 live 0 1 0 1 replaced joined leader",
        "epoch 4 live 0 1 0 1 replaced joined leader 1 3", "epoch 4 live 0 1 0 1 replaced joined leader 1 leader 1",
        "epoch 4 live 0 1 0 1 replaced leader 1 joined", "", "epoch 4 live 1 1 0 replaced joined",
        "epoch -1 live 1 1 0 1 replaced joined", "epoch 4 live 1 1 0 2 replaced joined",
        "epoch 4 live 0 1 0 1 replaced joined", "epoch 4 live 1 1 0 1 replaced 4 joined",
        "epoch 4 live 1 1 0 1 replaced 0 joined", "epoch 4 live 1 1 0 1 replaced joined x",
        "epoch 4 live 1 1 0 1 joined 2", "epoch 4 live 1 1 0 1 replaced 2", "era 4 live 1 1 0 1 replaced joined"}) {
    CAPTURE(bad);
    auto r = parse_membership(bad, 4);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("control: a malformed membership") == 0);
  }
  const std::vector<joined_entry> batch{{{2, "h2", 5000, 42, 2, 6000}, false}, {{3, "h3", 5001, 43, 1, 0}, true}};
  const std::string admitted = joined_text(7, batch);
  CHECK(admitted == "7 2 2 j h2 5000 42 2 6000 3 r h3 5001 43 1 0");
  auto got = parse_joined(admitted, 4);
  REQUIRE(got);
  CHECK(got->first == 7);
  REQUIRE(got->second.size() == 2);
  CHECK(got->second[0].node.host == "h2");
  CHECK(got->second[0].node.standby_port == 6000);
  CHECK_FALSE(got->second[0].replacement);
  CHECK(got->second[1].replacement);
  CHECK(parse_joined("7 0", 4)->second.empty());
  for (const std::string bad :
       {"0 0", "7 1", "7 1 0 j h 1 2 1 0", "7 1 4 j h 1 2 1 0", "7 1 2 x h 1 2 1 0", "7 1 2 j h/ 1 2 1 0",
        "7 1 2 j h 0 2 1 0", "7 1 2 j h 1 0 1 0", "7 1 2 j h 1 2 0 0", "7 2 2 j h 1 2 1 0 2 j h 1 2 1 0",
        "7 1 2 j h 1 2 1 0 extra", "7 4", "7 1 2 j h 1 2 1", "7 1 2 j h 1 2 1 65536"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_joined(bad, 4).ok());
  }
}
