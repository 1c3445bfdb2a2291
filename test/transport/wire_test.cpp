// The wire format: round trips for every dtype and rank, a clear error for each kind of bad
// frame (bad magic, version, dtype, rank, destination, extents, lengths, truncation at every
// byte, trailing bytes, stale generation, source out of range), and a seeded mutation loop that
// drives the decoder with damaged frames: it must answer every one with a frame or an error —
// no crash, and (under the ASan preset) no read outside the buffer.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "transport/wire.hpp"

using namespace cohort;
using namespace cohort::transport;

namespace {

tensor ramp(shape s) {
  tensor t = tensor::empty(s);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f - 3.f;
  return t;
}

void set_u64(std::vector<std::byte>& b, std::size_t at, std::uint64_t v) {
  for (std::size_t i = 0; i < 8; ++i) b[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

std::string message_of(const std::vector<std::byte>& bytes, const decode_limits& limits = {}) {
  auto r = decode_frame(bytes, limits);
  REQUIRE(!r);
  return r.error().message;
}

}  // namespace

TEST_CASE("frames round-trip every dtype and rank") {
  for (shape s : {shape{}, shape{0}, shape{1}, shape{7}, shape{3, 5}, shape{2, 3, 4}, shape{1, 1, 1, 1, 1, 1, 1, 2}}) {
    CAPTURE(s.rank());
    tensor t = ramp(s);
    auto bytes = encode_frame({.generation = 9, .tag = 123456789012ull, .source = 3, .destination = 2}, t);
    CHECK(bytes.size() ==
          frame_header_bytes + static_cast<std::size_t>(s.rank()) * 8 + static_cast<std::size_t>(t.numel()) * 4);
    auto f = decode_frame(bytes, {.check_generation = true, .expected_generation = 9, .ranks = 4});
    REQUIRE(f);
    CHECK(f->meta.generation == 9);
    CHECK(f->meta.tag == 123456789012ull);
    CHECK(f->meta.source == 3);
    CHECK(f->meta.destination == 2);
    CHECK(f->data.shape() == s);
    CHECK(std::memcmp(f->data.data<float>(), t.data<float>(), static_cast<std::size_t>(t.numel()) * 4) == 0);
  }
  tensor ids = tensor::from_ints({2, 2}, std::vector<std::int32_t>{1, -2, 3, 2147483647});
  auto f = decode_frame(encode_frame({}, ids), {});
  REQUIRE(f);
  CHECK(f->data.type() == dtype::i32);
  CHECK(f->data.data<std::int32_t>()[3] == 2147483647);
}

TEST_CASE("each kind of bad frame is refused with a message naming what is wrong") {
  const auto good = encode_frame({.generation = 2, .tag = 5, .source = 1}, ramp({2, 3}));
  auto with = [&](std::size_t at, std::byte v) {
    auto b = good;
    b[at] = v;
    return b;
  };
  CHECK(message_of(with(0, std::byte{0})) == "frame: bad magic 0x54524800 (expected 0x54524843)");
  CHECK(message_of(with(4, std::byte{2})) == "frame: unsupported version 2 (this build speaks 1)");
  CHECK(message_of(with(6, std::byte{9})) == "frame: unknown dtype code 9");
  CHECK(message_of(with(7, std::byte{9})) == "frame: rank 9 over the limit of 8");
  CHECK(message_of(with(12, std::byte{7}), {.ranks = 4}) == "frame: destination rank 7 out of range (4 ranks)");
  auto negative = good;
  set_u64(negative, frame_header_bytes, static_cast<std::uint64_t>(-2));
  CHECK(message_of(negative) == "frame: negative extent -2 on axis 0");
  auto huge = good;
  set_u64(huge, 32, std::uint64_t{1} << 40);
  CHECK(message_of(huge) == "frame: payload of 1099511627776 bytes over the limit of 4294967296");
  auto mismatch = good;
  set_u64(mismatch, frame_header_bytes + 8, 4);  // [2,4] = 8 elements against 24 bytes
  CHECK(message_of(mismatch) == "frame: shape of 8 elements does not match a payload of 24 bytes");
  auto overflow = good;
  set_u64(overflow, frame_header_bytes, std::uint64_t{1} << 62);
  set_u64(overflow, frame_header_bytes + 8, std::uint64_t{1} << 62);
  CHECK(message_of(overflow) == "frame: element count overflows");
  auto longer = good;
  longer.push_back(std::byte{0});
  CHECK(message_of(longer) == "frame: 1 bytes after the payload");
  CHECK(message_of(good, {.ranks = 1}) == "frame: source rank 1 out of range (1 ranks)");
  auto stale = decode_frame(good, {.check_generation = true, .expected_generation = 3});
  REQUIRE(!stale);
  CHECK(stale.error().code == errc::closed);
  CHECK(stale.error().message == "frame: stale generation 2 (the job is at 3)");
}

TEST_CASE("a frame cut short at any byte is refused, never read past") {
  const auto good = encode_frame({.tag = 1}, ramp({3, 4}));
  for (std::size_t n = 0; n < good.size(); ++n) {
    CAPTURE(n);
    // a copy of exactly n bytes, so ASan catches a read past the end
    std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = decode_frame(cut, {});
    REQUIRE(!r);
    CHECK(r.error().message.rfind("frame: truncated", 0) == 0);
  }
}

TEST_CASE("seeded mutations of valid frames: every one decodes or is refused, and what decodes is consistent") {
  std::mt19937_64 rng(20261130);
  const std::vector<std::vector<std::byte>> seeds = {
      encode_frame({.generation = 1, .tag = 2, .source = 0}, ramp({4})),
      encode_frame({.generation = 7, .tag = 9, .source = 2}, ramp({2, 3, 2})), encode_frame({}, ramp({}))};
  int decoded = 0, refused = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    auto bytes = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0:  // flip a byte
          if (!bytes.empty()) bytes[rng() % bytes.size()] = static_cast<std::byte>(rng() & 0xff);
          break;
        case 1:  // truncate
          bytes.resize(bytes.empty() ? 0 : rng() % bytes.size());
          break;
        case 2:  // append garbage
          for (int k = static_cast<int>(rng() % 16); k > 0; --k) bytes.push_back(static_cast<std::byte>(rng() & 0xff));
          break;
        default:  // overwrite a header word with an extreme value
          if (bytes.size() >= 40) set_u64(bytes, 8 * (rng() % 5), rng() % 2 ? ~std::uint64_t{0} : rng());
      }
    }
    std::vector<std::byte> exact(bytes);  // exactly sized: ASan sees any over-read
    auto r = decode_frame(exact, {.max_payload_bytes = 1 << 20});
    if (r) {
      ++decoded;
      CHECK(static_cast<std::uint64_t>(r->data.numel()) * size_of(r->data.type()) + frame_header_bytes +
                static_cast<std::uint64_t>(r->data.shape().rank()) * 8 ==
            exact.size());
    } else {
      ++refused;
      CHECK(r.error().message.rfind("frame: ", 0) == 0);
    }
  }
  MESSAGE("mutated frames: " << decoded << " decoded, " << refused << " refused");
  CHECK(refused > 10000);
}
