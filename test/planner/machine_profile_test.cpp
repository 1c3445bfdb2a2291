// The machine profile's GEMM rates: arithmetic and operand traffic solved from two shapes.
#include <doctest/doctest.h>

#include "planner/machine_profile.hpp"

using namespace cohort;

TEST_CASE("GEMM rates: two timings made from known rates give those rates back") {
  const double F = 150e9, B = 20e9;
  auto timing = [&](double m, double k, double n) {
    const double flops = 2 * m * k * n, bytes = 4 * (m * k + k * n + m * n);
    return planner::gemm_timing{flops, bytes, flops / F + bytes / B};
  };
  auto r = planner::solve_gemm_rates(timing(512, 512, 512), timing(32, 512, 512));
  CHECK(r.flops_per_s == doctest::Approx(F));
  CHECK(r.bytes_per_s == doctest::Approx(B));
}

TEST_CASE("GEMM rates: timings that noise made inconsistent fall back to the square GEMM's rate") {
  // the skinny GEMM ran faster per FLOP than the square one: no positive traffic term exists
  planner::gemm_timing square{2.0 * 512 * 512 * 512, 4.0 * 3 * 512 * 512, 2e-3};
  planner::gemm_timing skinny{2.0 * 32 * 512 * 512, 4.0 * (2 * 32 * 512 + 512 * 512), 0.05e-3};
  auto r = planner::solve_gemm_rates(square, skinny);
  CHECK(r.flops_per_s == doctest::Approx(square.flops / square.seconds));
  CHECK(r.bytes_per_s == 0);
}
