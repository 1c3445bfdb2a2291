// Initial values of parameters: each parameter's tensor depends only on (seed, name), so the
// same model built twice, or split across ranks, starts from identical weights.
//
//   graph g;
//   var loss = tiny_mlp(g, /*rows=*/64);             // any model: parameters fc1.*, fc2.*
//   parameter_store params = init_parameters(g, /*seed=*/0);
//   tensor w = params.at("fc1.weight");              // [8,16] ~ U(-1/sqrt(8), 1/sqrt(8))
//   tensor same = initial_value("fc1.weight", {8, 16}, init_spec::uniform(1.f / std::sqrt(8.f)), 0);   // w's values
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.hpp"
#include "graph/tensor.hpp"

namespace cohort {

/// The full value of one parameter from its init spec.
tensor initial_value(const std::string& name, const shape& s, init_spec init, std::uint64_t seed);

/// Parameter tensors keyed by parameter name. Graphs built from the same model code (a
/// training graph and an evaluation graph of another batch size) bind the same tensors.
using parameter_store = std::map<std::string, tensor>;

parameter_store init_parameters(const graph& g, std::uint64_t seed);

}  // namespace cohort
