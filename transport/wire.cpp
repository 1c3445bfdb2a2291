// Frame encoding and defensive decoding.
#include "transport/wire.hpp"

#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace cohort::transport {
namespace {

template <class T>
void put(std::vector<std::byte>& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
}

template <class T>
T get(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
  return static_cast<T>(v);
}

error bad(const std::string& what) { return {errc::io_error, "frame: " + what}; }

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%08llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

std::vector<std::byte> encode_frame_prefix(const frame_meta& meta, const tensor& c) {
  const std::uint64_t payload = static_cast<std::uint64_t>(c.numel()) * size_of(c.type());
  std::vector<std::byte> out;
  out.reserve(frame_header_bytes + c.shape().dims().size() * 8);
  put<std::uint32_t>(out, frame_magic);
  put<std::uint16_t>(out, frame_version);
  put<std::uint8_t>(out, static_cast<std::uint8_t>(c.type()));
  put<std::uint8_t>(out, static_cast<std::uint8_t>(c.shape().rank()));
  put<std::uint32_t>(out, meta.source);
  put<std::uint32_t>(out, meta.destination);
  put<std::uint64_t>(out, meta.generation);
  put<std::uint64_t>(out, meta.tag);
  put<std::uint64_t>(out, payload);
  for (auto d : c.shape().dims()) put<std::int64_t>(out, d);
  return out;
}

std::vector<std::byte> encode_frame(const frame_meta& meta, const tensor& t) {
  const tensor c = t.is_contiguous() ? t : t.contiguous();
  std::vector<std::byte> out = encode_frame_prefix(meta, c);
  const std::size_t payload = static_cast<std::size_t>(c.numel()) * size_of(c.type());
  const auto* p = c.data<std::byte>();
  out.insert(out.end(), p, p + payload);
  return out;
}

result<frame_prefix> decode_frame_header(std::span<const std::byte> in, const decode_limits& limits) {
  if (in.size() < frame_header_bytes)
    return bad("truncated header: " + std::to_string(in.size()) + " of " + std::to_string(frame_header_bytes) +
               " bytes");
  frame_prefix f;
  if (auto magic = get<std::uint32_t>(in, 0); magic != frame_magic)
    return bad("bad magic " + hex(magic) + " (expected " + hex(frame_magic) + ")");
  if (auto version = get<std::uint16_t>(in, 4); version != frame_version)
    return bad("unsupported version " + std::to_string(version) + " (this build speaks " +
               std::to_string(frame_version) + ")");
  auto type = get<std::uint8_t>(in, 6);
  if (type > static_cast<std::uint8_t>(dtype::f16)) return bad("unknown dtype code " + std::to_string(type));
  f.type = static_cast<dtype>(type);
  f.rank = get<std::uint8_t>(in, 7);
  if (f.rank > frame_max_rank)
    return bad("rank " + std::to_string(f.rank) + " over the limit of " + std::to_string(frame_max_rank));
  f.meta.source = get<std::uint32_t>(in, 8);
  if (limits.ranks > 0 && f.meta.source >= limits.ranks)
    return bad("source rank " + std::to_string(f.meta.source) + " out of range (" + std::to_string(limits.ranks) +
               " ranks)");
  f.meta.destination = get<std::uint32_t>(in, 12);
  if (limits.ranks > 0 && f.meta.destination >= limits.ranks)
    return bad("destination rank " + std::to_string(f.meta.destination) + " out of range (" +
               std::to_string(limits.ranks) + " ranks)");
  f.meta.generation = get<std::uint64_t>(in, 16);
  f.meta.tag = get<std::uint64_t>(in, 24);
  f.payload_bytes = get<std::uint64_t>(in, 32);
  if (f.payload_bytes > limits.max_payload_bytes)
    return bad("payload of " + std::to_string(f.payload_bytes) + " bytes over the limit of " +
               std::to_string(limits.max_payload_bytes));
  if (limits.check_generation && f.meta.generation != limits.expected_generation)
    return error{errc::closed, "frame: stale generation " + std::to_string(f.meta.generation) + " (the job is at " +
                                   std::to_string(limits.expected_generation) + ")"};
  return f;
}

result<shape> decode_frame_shape(const frame_prefix& f, std::span<const std::byte> in) {
  if (in.size() != static_cast<std::size_t>(f.rank) * 8)
    return bad("truncated shape: " + std::to_string(in.size()) + " of " + std::to_string(f.rank * 8) + " bytes");
  std::vector<std::int64_t> dims;
  std::uint64_t numel = 1;
  for (int i = 0; i < f.rank; ++i) {
    auto d = get<std::int64_t>(in, static_cast<std::size_t>(i) * 8);
    if (d < 0) return bad("negative extent " + std::to_string(d) + " on axis " + std::to_string(i));
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && numel > std::numeric_limits<std::uint64_t>::max() / u) return bad("element count overflows");
    numel *= u;
    dims.push_back(d);
  }
  const std::uint64_t element = size_of(f.type);
  if (numel > f.payload_bytes / element || numel * element != f.payload_bytes)
    return bad("shape of " + std::to_string(numel) + " elements does not match a payload of " +
               std::to_string(f.payload_bytes) + " bytes");
  return shape(std::move(dims));
}

result<frame> decode_frame(std::span<const std::byte> in, const decode_limits& limits) {
  auto prefix = decode_frame_header(in, limits);
  if (!prefix) return prefix.error();
  const frame_prefix& f = *prefix;
  const std::size_t shape_end = frame_header_bytes + static_cast<std::size_t>(f.rank) * 8;
  if (in.size() < shape_end)
    return bad("truncated shape: " + std::to_string(in.size() - frame_header_bytes) + " of " +
               std::to_string(shape_end - frame_header_bytes) + " bytes");
  auto s = decode_frame_shape(f, in.subspan(frame_header_bytes, shape_end - frame_header_bytes));
  if (!s) return s.error();
  const std::uint64_t expected = shape_end + f.payload_bytes;
  if (in.size() < expected)
    return bad("truncated payload: " + std::to_string(in.size() - shape_end) + " of " +
               std::to_string(f.payload_bytes) + " bytes");
  if (in.size() > expected) return bad(std::to_string(in.size() - expected) + " bytes after the payload");
  frame out;
  out.meta = f.meta;
  out.data = tensor::empty(std::move(*s), f.type);
  if (f.payload_bytes > 0) std::memcpy(out.data.data<std::byte>(), in.data() + shape_end, f.payload_bytes);
  return out;
}

}  // namespace cohort::transport
