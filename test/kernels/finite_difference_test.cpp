// Every op's backward against central finite differences of the forward pass, computed
// with the reference kernels: for random directions u, the central difference
// D(h) = (L(p + h u) - L(p - h u)) / 2h, Richardson-extrapolated as (4 D(h/2) - D(h)) / 3
// to cancel the h^2 term, must equal <dL/dp, u> for every parameter p of every op case.
#include <doctest/doctest.h>

#include <cmath>

#include "harness.hpp"
#include "kernels/dispatch.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {

float forward_loss(case_run& run, kernels::executor& ex) {
  auto st = ex.run(0, run.grads.backward_begin);
  REQUIRE_MESSAGE(st.ok(), st.error().message);
  return ex.value(run.loss.id).data<float>()[0];
}

}  // namespace

TEST_CASE("every op's gradient matches central finite differences") {
  auto ref = kernels::reference_kernels();
  const float eps = 1e-2f;
  for (const auto& c : all_op_cases()) {
    if (!c.differentiable) continue;
    for (std::uint64_t seed = 11; seed <= 13; ++seed) {
      CAPTURE(c.name);
      CAPTURE(seed);
      auto run = prepare(c, seed);
      auto analytic = execute(*run, ref);
      auto ex = kernels::executor::create(run->g, run->bc.params, {run->loss.id}, {&ref, nullptr});
      REQUIRE(ex.ok());
      for (auto& [name, t] : run->bc.inputs) ex->input(run->g.find(name)).copy_from(t);
      ex->input(run->g.find("probe")).copy_from(run->probe);
      for (std::size_t i = 0; i < run->grads.param_grads.size(); ++i) {
        const std::string& name = run->g.value(run->grads.param_grads[i].first).name;
        CAPTURE(name);
        tensor& p = run->bc.params.at(name);  // shared with the executor
        tensor saved = p.clone();
        for (std::uint64_t dir = 0; dir < 2; ++dir) {
          tensor u = random_tensor(p.shape(), seed * 100 + dir);
          double predicted = 0;
          for (std::int64_t j = 0; j < p.numel(); ++j)
            predicted += static_cast<double>(analytic.grads[i].data<float>()[j]) * u.data<float>()[j];
          auto loss_at = [&](float step) {
            for (std::int64_t j = 0; j < p.numel(); ++j)
              p.data<float>()[j] = saved.data<float>()[j] + step * u.data<float>()[j];
            return static_cast<double>(forward_loss(*run, *ex));
          };
          auto central = [&](float h) { return (loss_at(h) - loss_at(-h)) / (2.0 * h); };
          double numeric = (4.0 * central(eps / 2) - central(eps)) / 3.0;
          p.copy_from(saved);
          double tol = 2e-2 * std::max(std::fabs(numeric), std::fabs(predicted)) + 2e-3;
          CHECK_MESSAGE(std::fabs(numeric - predicted) <= tol, "numeric " << numeric << " vs analytic " << predicted);
        }
      }
    }
  }
}
