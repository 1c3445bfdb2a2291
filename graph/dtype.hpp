// Element types. f32 is what the kernels compute in today; i32 carries indices (token ids,
// class labels). bf16 and f16 are named so that storage, shapes and wire formats already
// account for 2-byte elements; no kernel accepts them yet.
//
//   static_assert(size_of(dtype::f32) == 4 && size_of(dtype::bf16) == 2);
//   static_assert(dtype_of<std::int32_t>() == dtype::i32);
//   std::string name = to_string(dtype::i32);   // "i32"
#pragma once

#include <cstddef>
#include <cstdint>

namespace cohort {

enum class dtype : std::uint8_t { f32, i32, bf16, f16 };

constexpr std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::f32:
      return 4;
    case dtype::i32:
      return 4;
    case dtype::bf16:
      return 2;
    case dtype::f16:
      return 2;
  }
  return 0;
}

constexpr const char* to_string(dtype t) {
  switch (t) {
    case dtype::f32:
      return "f32";
    case dtype::i32:
      return "i32";
    case dtype::bf16:
      return "bf16";
    case dtype::f16:
      return "f16";
  }
  return "?";
}

template <class T>
constexpr dtype dtype_of();
template <>
constexpr dtype dtype_of<float>() {
  return dtype::f32;
}
template <>
constexpr dtype dtype_of<std::int32_t>() {
  return dtype::i32;
}

}  // namespace cohort
