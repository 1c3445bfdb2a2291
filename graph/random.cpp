// xoshiro256** and splitmix64 (public-domain algorithms by Blackman and Vigna).
#include "graph/random.hpp"

#include <cmath>
#include <numbers>

namespace cohort {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

rng::rng(std::uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

std::uint64_t rng::next() {
  std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float rng::uniform() { return static_cast<float>(next() >> 40) * (1.f / 16777216.f); }

float rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = (static_cast<double>(next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);  // (0,1]
  double u2 = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
  double r = std::sqrt(-2.0 * std::log(u1));
  double theta = 2.0 * std::numbers::pi * u2;
  spare_ = static_cast<float>(r * std::sin(theta));
  has_spare_ = true;
  return static_cast<float>(r * std::cos(theta));
}

std::uint64_t rng::below(std::uint64_t n) {
  // Modulo with rejection of the incomplete last block: unbiased.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  while (true) {
    std::uint64_t x = next();
    if (x < limit) return x % n;
  }
}

std::uint64_t derive_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  std::uint64_t x = seed ^ h;
  return splitmix64(x);
}

}  // namespace cohort
