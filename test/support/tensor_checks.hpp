// Test helpers: random tensors, and closeness checks that report the worst element and the
// first mismatches instead of a bare true/false.
//
//   tensor a = random_tensor({3, 5}, /*seed=*/1);
//   CHECK_MESSAGE(close(a, b, 1e-5f, 1e-6f), describe_mismatch(a, b, 1e-5f, 1e-6f));
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "graph/random.hpp"
#include "graph/tensor.hpp"

namespace cohort::test {

inline tensor random_tensor(const shape& s, std::uint64_t seed, float scale = 1.f, float min_abs = 0.f) {
  tensor t = tensor::empty(s, dtype::f32);
  rng r(seed);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    float v = r.normal() * scale;
    if (std::fabs(v) < min_abs) v = v < 0 ? v - min_abs : v + min_abs;
    p[i] = v;
  }
  return t;
}

inline tensor random_ints(const shape& s, std::uint64_t seed, std::int32_t bound) {
  tensor t = tensor::empty(s, dtype::i32);
  rng r(seed);
  auto* p = t.data<std::int32_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<std::int32_t>(r.below(static_cast<std::uint64_t>(bound)));
  return t;
}

/// |a - b| <= atol + rtol * |b| elementwise (b is the reference), equal shapes, same infinities.
inline bool close(const tensor& a, const tensor& b, float rtol, float atol) {
  if (a.shape() != b.shape()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    float x = a.at(i), y = b.at(i);
    if (std::isinf(y) || std::isinf(x)) {
      if (x != y) return false;
      continue;
    }
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) return false;
  }
  return true;
}

inline std::string describe_mismatch(const tensor& a, const tensor& b, float rtol, float atol) {
  if (a.shape() != b.shape()) return "shapes differ: " + a.shape().to_string() + " vs " + b.shape().to_string();
  std::string out;
  double worst = 0;
  std::int64_t worst_i = -1;
  int shown = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    float x = a.at(i), y = b.at(i);
    double err = std::fabs(static_cast<double>(x) - y);
    if (std::isnan(err) || err > worst) {
      worst = std::isnan(err) ? INFINITY : err;
      worst_i = i;
    }
    if (!(err <= atol + rtol * std::fabs(y)) && shown < 5) {
      out += " [" + std::to_string(i) + "] " + std::to_string(x) + " vs " + std::to_string(y) + ";";
      ++shown;
    }
  }
  return "shape " + a.shape().to_string() + ", max abs error " + std::to_string(worst) + " at " +
         std::to_string(worst_i) + ", first mismatches:" + out;
}

}  // namespace cohort::test
