// One test case per op (several for ops with variants): a builder that draws shapes,
// including the odd ones (1, primes, broadcast axes), creates the differentiable operands
// as parameters with random values, and returns the op's result. Both the fast-vs-reference
// test and the finite-difference test run every case here.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "graph/init.hpp"
#include "graph/random.hpp"

namespace cohort::test {

struct built_case {
  var out;
  parameter_store params;                // differentiable operands
  std::map<std::string, tensor> inputs;  // operands that are data, not differentiated (labels, ids)
};

struct op_case {
  std::string name;
  std::function<built_case(graph&, rng&)> build;
  bool differentiable = true;
};

const std::vector<op_case>& all_op_cases();

}  // namespace cohort::test
