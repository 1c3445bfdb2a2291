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
#include <map>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "graph/init.hpp"
#include "graph/tensor.hpp"

namespace cohort::apps {

/// The fraction of rows of `x` ([N, F] f32) whose argmax logit is their label in `y` ([N] i32):
/// `logits` builds the model's logits for `rows` rows from an input named "x", run forward
/// with `params` by predict_rows in chunks of at most 1000 rows.
result<double> classification_accuracy(const std::function<var(graph&, std::int64_t rows)>& logits, const tensor& x,
                                       const tensor& y, const parameter_store& params, int threads);

/// The model's output for every row of `inputs` (each [N, ...], named as the model's
/// inputs), row after row (N x its width values): `out` builds it for `rows` rows, run
/// forward with `params` in chunks of at most `chunk` rows, the last as large as what is left.
result<std::vector<float>> predict_rows(const std::function<var(graph&, std::int64_t rows)>& out,
                                        const std::map<std::string, tensor>& inputs, const parameter_store& params,
                                        int threads, std::int64_t chunk = 4096);

/// The area under the ROC curve of `scores` against 0/1 `labels`, ties counted half (the
/// Mann-Whitney statistic, as sklearn's roc_auc_score). Needs both classes present.
result<double> roc_auc(const std::vector<float>& scores, const std::vector<float>& labels);

/// Mean binary cross-entropy of probabilities sigmoid(logits) against 0/1 labels (as
/// sklearn's log_loss on probabilities clipped to [1e-7, 1 - 1e-7]).
double log_loss_of_logits(const std::vector<float>& logits, const std::vector<float>& labels);

}  // namespace cohort::apps
