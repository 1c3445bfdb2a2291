// A small deterministic random generator (xoshiro256**, seeded through splitmix64) whose
// output is the same on every platform and standard library, unlike std::*_distribution.
// Parameter initialization and data sampling use it, so runs are reproducible bit for bit.
//
//   rng r(42);
//   float u = r.uniform();          // [0, 1)
//   float z = r.normal();           // N(0, 1), Box-Muller
//   std::uint64_t i = r.below(10);  // [0, 10)
//   rng per_name(derive_seed(42, "fc1.weight"));   // a stream that depends on (seed, name) only
#pragma once

#include <cstdint>
#include <string_view>

namespace cohort {

class rng {
 public:
  explicit rng(std::uint64_t seed);
  std::uint64_t next();
  /// Uniform in [0, 1) with 24 random bits.
  float uniform();
  /// Standard normal.
  float normal();
  /// Uniform integer in [0, n), n > 0.
  std::uint64_t below(std::uint64_t n);

 private:
  std::uint64_t s_[4];
  float spare_ = 0.f;
  bool has_spare_ = false;
};

/// A seed derived from a base seed and a name (FNV-1a mixed through splitmix64), so each
/// parameter's initial value depends only on (seed, name), not on creation order.
std::uint64_t derive_seed(std::uint64_t seed, std::string_view name);

}  // namespace cohort
