// Runs an op case: adds a probe loss sum(out * probe) with a fixed random probe, takes its
// gradients, and executes forward + backward with a chosen dispatch table.
#pragma once

#include <memory>
#include <vector>

#include "graph/autodiff.hpp"
#include "graph/dsl.hpp"
#include "kernels/executor.hpp"
#include "op_cases.hpp"
#include "support/tensor_checks.hpp"

namespace cohort::test {

struct case_run {
  graph g;
  built_case bc;
  var loss;
  gradients grads;
  tensor probe;
};

inline std::unique_ptr<case_run> prepare(const op_case& c, std::uint64_t seed) {
  auto run = std::make_unique<case_run>();
  rng r(seed);
  run->bc = c.build(run->g, r);
  var out = run->bc.out;
  REQUIRE_MESSAGE(run->g.check().ok(), run->g.check().error().message);
  var probe = run->g.input("probe", out.shape());
  run->probe = random_tensor(out.shape(), seed + 1000);
  run->loss = sum(mul(out, probe));
  auto gr = autodiff(run->g, run->loss);
  REQUIRE_MESSAGE(gr.ok(), gr.error().message);
  run->grads = *gr;
  return run;
}

struct case_outputs {
  tensor out;
  float loss = 0;
  std::vector<tensor> grads;  // aligned with grads.param_grads
};

inline case_outputs execute(case_run& run, const kernels::dispatch_table& table, kernels::thread_pool* pool = nullptr) {
  std::vector<value_id> keep{run.bc.out.id, run.loss.id};
  for (auto [p, gr] : run.grads.param_grads) keep.push_back(gr);
  auto ex = kernels::executor::create(run.g, run.bc.params, keep, {&table, pool});
  REQUIRE_MESSAGE(ex.ok(), ex.error().message);
  for (auto& [name, t] : run.bc.inputs) ex->input(run.g.find(name)).copy_from(t);
  ex->input(run.g.find("probe")).copy_from(run.probe);
  ex->input(run.grads.seed).fill(1.f);
  auto st = ex->run();
  REQUIRE_MESSAGE(st.ok(), st.error().message);
  case_outputs o;
  o.out = ex->value(run.bc.out.id).clone();
  o.loss = ex->value(run.loss.id).data<float>()[0];
  for (auto [p, gr] : run.grads.param_grads) o.grads.push_back(ex->value(gr).clone());
  return o;
}

}  // namespace cohort::test
