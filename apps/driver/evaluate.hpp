// Evaluation helpers an app's `evaluate` hook can use on the trained parameters.
//
//   std::vector<std::int64_t> dims{64, 32, 10};
//   auto logits = [&](graph& g, std::int64_t rows) { return build_mlp(g, dims, rows).logits; };
//   auto digits = load_classification("digits", default_data_dir(), /*seed=*/0);
//   if (!digits) return digits.error();
//   graph g;
//   mlp_model m = build_mlp(g, dims, /*batch=*/32);
//   parameter_store trained = init_parameters(g, /*seed=*/0);   // a run's training_result::parameters
//   result<double> acc = classification_accuracy(logits, digits->test.x, digits->test.y, trained, /*threads=*/2);
#pragma once

#include <cstdint>
#include <functional>

#include "graph/graph.hpp"
#include "graph/init.hpp"
#include "graph/tensor.hpp"

namespace cohort::apps {

/// The fraction of rows of `x` ([N, F] f32) whose argmax logit is their label in `y` ([N] i32):
/// `logits` builds the model's logits for `rows` rows from an input named "x", run forward
/// with `params` in chunks of at most 1000 rows (a last partial chunk is left out).
result<double> classification_accuracy(const std::function<var(graph&, std::int64_t rows)>& logits, const tensor& x,
                                       const tensor& y, const parameter_store& params, int threads);

}  // namespace cohort::apps
