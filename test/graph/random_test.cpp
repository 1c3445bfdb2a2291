// The deterministic generator: fixed outputs, sane moments, seeds derived from names.
#include <doctest/doctest.h>

#include <cmath>

#include "graph/init.hpp"
#include "graph/random.hpp"

using namespace cohort;

TEST_CASE("the same seed gives the same stream, different seeds differ") {
  rng a(42), b(42), c(43);
  for (int i = 0; i < 10; ++i) {
    auto x = a.next();
    CHECK(x == b.next());
    CHECK(x != c.next());
  }
}

TEST_CASE("uniform and normal have the expected moments") {
  rng r(1);
  double su = 0, sn = 0, sn2 = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    float u = r.uniform();
    CHECK((u >= 0.f && u < 1.f));
    su += u;
    float z = r.normal();
    sn += z;
    sn2 += z * z;
  }
  CHECK(su / n == doctest::Approx(0.5).epsilon(0.01));
  CHECK(std::fabs(sn / n) < 0.01);
  CHECK(sn2 / n == doctest::Approx(1.0).epsilon(0.02));
  for (int i = 0; i < 1000; ++i) CHECK(r.below(7) < 7);
}

TEST_CASE("a parameter's initial value depends on (seed, name) only") {
  tensor a = initial_value("fc1.weight", {3, 4}, init_spec::uniform(0.5f), 9);
  tensor b = initial_value("fc1.weight", {3, 4}, init_spec::uniform(0.5f), 9);
  tensor c = initial_value("fc2.weight", {3, 4}, init_spec::uniform(0.5f), 9);
  CHECK(a.to_vector() == b.to_vector());
  CHECK(a.to_vector() != c.to_vector());
  for (float v : a.to_vector()) CHECK(std::fabs(v) <= 0.5f);
  CHECK(initial_value("g", {2}, init_spec::ones(), 0).to_vector() == std::vector<float>{1, 1});
}
