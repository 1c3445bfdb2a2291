// The wire format of a tensor message between processes: a fixed little-endian header, the
// shape, then the payload. Decoding trusts nothing: every field is checked against limits
// before anything is allocated or read, and a frame is rejected with a message that says which
// field was wrong. The TCP and UCX data planes (issue 4) carry these frames.
//
//   header (40 bytes, little-endian):
//     u32 magic 'CHRT' | u16 version | u8 dtype | u8 rank | u32 source | u32 destination
//     u64 generation | u64 tag | u64 payload_bytes
//   then rank x i64 dims, then payload_bytes of tensor data (numel x dtype size exactly).
//
//   tensor t = tensor::full({2, 3}, 1.f);
//   std::vector<std::byte> bytes = encode_frame({.generation = 3, .tag = 7, .source = 1}, t);
//   result<frame> f = decode_frame(bytes, {.check_generation = true, .expected_generation = 3});
//   if (!f) return f.error();   // e.g. "frame: bad magic 0x00000000 (expected 0x54524843)"
//   assert(f->meta.tag == 7 && f->data.shape() == t.shape() && bytes.size() == frame_header_bytes + 2 * 8 + 24);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "graph/error.hpp"
#include "graph/tensor.hpp"

namespace cohort::transport {

inline constexpr std::uint32_t frame_magic = 0x54524843;  // "CHRT" read as little-endian bytes
inline constexpr std::uint16_t frame_version = 1;
inline constexpr std::size_t frame_header_bytes = 40;
inline constexpr int frame_max_rank = 8;

struct frame_meta {
  std::uint64_t generation = 0;  // the job's generation when sent: stale frames are refused
  std::uint64_t tag = 0;
  std::uint32_t source = 0;       // the sending rank
  std::uint32_t destination = 0;  // the receiving rank
};

struct frame {
  frame_meta meta;
  tensor data;
};

struct decode_limits {
  std::uint64_t max_payload_bytes = std::uint64_t{1} << 32;  // 4 GiB
  /// When set, a frame of another generation is refused (errc::closed: from a previous job).
  bool check_generation = false;
  std::uint64_t expected_generation = 0;
  std::uint32_t ranks = 0;  // when > 0, source and destination must be below it
};

/// The whole frame for a contiguous tensor (views are copied out in order).
std::vector<std::byte> encode_frame(const frame_meta& meta, const tensor& t);

/// The header and the shape of a frame, without the payload: a stream writes these bytes,
/// then the tensor's own storage (no copy of the payload).
std::vector<std::byte> encode_frame_prefix(const frame_meta& meta, const tensor& contiguous);

/// Reads the header alone (for a stream: then read header_and_shape_bytes() + payload).
struct frame_prefix {
  frame_meta meta;
  dtype type = dtype::f32;
  int rank = 0;
  std::uint64_t payload_bytes = 0;
  std::size_t total_bytes() const { return frame_header_bytes + static_cast<std::size_t>(rank) * 8 + payload_bytes; }
};
result<frame_prefix> decode_frame_header(std::span<const std::byte> bytes, const decode_limits& limits);

/// The shape that follows a header (prefix.rank x i64, exactly), checked against the
/// payload size: then allocate the tensor and read the payload into it.
result<shape> decode_frame_shape(const frame_prefix& prefix, std::span<const std::byte> dims);

/// A complete frame: exactly total_bytes() long. Errors (errc::io_error unless stale):
/// truncated or trailing bytes, bad magic, unknown version, unknown dtype, rank over the
/// limit, a negative extent, extents whose element count overflows or
/// disagrees with payload_bytes, a payload over the limit, a source out of range; a stale
/// generation is errc::closed.
result<frame> decode_frame(std::span<const std::byte> bytes, const decode_limits& limits);

}  // namespace cohort::transport
