// Evaluation with the serial executor: classification accuracy, row-wise predictions, and
// the binary classifier metrics (ROC AUC, log-loss).
#include "apps/driver/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/dispatch.hpp"
#include "kernels/executor.hpp"
#include "kernels/thread_pool.hpp"
#include "kernels/threads.hpp"

namespace cohort::apps {

result<double> classification_accuracy(const std::function<var(graph&, std::int64_t rows)>& logits, const tensor& x,
                                       const tensor& y, const parameter_store& params, int threads) {
  const std::int64_t n = x.shape()[0];
  if (n < 1) return 0.0;
  auto scores = predict_rows(logits, {{"x", x.contiguous()}}, params, threads, 1000);
  if (!scores) return make_error(scores.error().code, "accuracy: " + scores.error().message);
  const auto classes = static_cast<std::int64_t>(scores->size()) / n;
  const tensor ys = y.contiguous();
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = scores->data() + i * classes;
    correct += (std::max_element(row, row + classes) - row) == ys.data<std::int32_t>()[i] ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

result<std::vector<float>> predict_rows(const std::function<var(graph&, std::int64_t rows)>& out,
                                        const std::map<std::string, tensor>& inputs, const parameter_store& params,
                                        int threads, std::int64_t chunk) {
  if (inputs.empty()) return make_error(errc::invalid_argument, "predict_rows: no inputs");
  const std::int64_t n = inputs.begin()->second.shape()[0];
  for (const auto& [name, t] : inputs)
    if (t.shape().rank() < 1 || t.shape()[0] != n)
      return make_error(errc::invalid_argument,
                        "predict_rows: input '" + name + "' does not have " + std::to_string(n) + " rows");
  kernels::thread_pool pool(std::max(1, threads));
  kernels::set_math_threads(std::max(1, threads));
  auto table = kernels::cpu_kernels();
  std::vector<float> result_rows;
  result_rows.reserve(static_cast<std::size_t>(n));
  // one executor per chunk size: the full chunks share one, the last may need its own
  auto run_chunks = [&](std::int64_t size, std::int64_t begin, std::int64_t end) -> status {
    graph g;
    var y = out(g, size);
    if (auto st = g.check(); !st) return st;
    const std::int64_t width = size > 0 ? g.value(y.id).type.shape.numel() / size : 0;
    if (width < 1 || width * size != g.value(y.id).type.shape.numel())
      return make_error(errc::invalid_argument, "predict_rows: the model's output is not rows of values");
    auto ex = kernels::executor::create(g, params, {y.id}, {&table, &pool});
    if (!ex) return ex.error();
    std::vector<std::pair<value_id, const tensor*>> feeds;
    for (const auto& [name, t] : inputs) {
      const value_id id = g.find(name);
      if (id == no_value)
        return make_error(errc::not_found, "predict_rows: the model has no input named '" + name + "'");
      feeds.emplace_back(id, &t);
    }
    for (std::int64_t b = begin; b < end; b += size) {
      for (auto [id, t] : feeds) {
        const std::size_t row_bytes = static_cast<std::size_t>(t->numel() / n) * size_of(t->type());
        std::memcpy(ex->input(id).data<std::byte>(), t->data<std::byte>() + static_cast<std::size_t>(b) * row_bytes,
                    static_cast<std::size_t>(size) * row_bytes);
      }
      if (auto st = ex->run(); !st) return st;
      const float* v = ex->value(y.id).data<float>();
      result_rows.insert(result_rows.end(), v, v + size * width);
    }
    return {};
  };
  const std::int64_t c = std::max<std::int64_t>(1, std::min(chunk, n));
  const std::int64_t full = n / c * c;
  if (full > 0)
    if (auto st = run_chunks(c, 0, full); !st) return st.error();
  if (full < n)
    if (auto st = run_chunks(n - full, full, n); !st) return st.error();
  return result_rows;
}

result<double> roc_auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  if (scores.size() != labels.size())
    return make_error(errc::invalid_argument, "roc_auc: " + std::to_string(scores.size()) + " scores for " +
                                                  std::to_string(labels.size()) + " labels");
  for (std::size_t i = 0; i < scores.size(); ++i)
    if (std::isnan(scores[i]))
      return make_error(errc::invalid_argument, "roc_auc: score " + std::to_string(i) + " is not a number");
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // the sum of the positives' ranks, tied scores sharing their mean rank
  double rank_sum = 0, positives = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t k = i; k < j; ++k)
      if (labels[order[k]] > 0.5f) {
        rank_sum += mean_rank;
        positives += 1;
      }
    i = j;
  }
  const double negatives = static_cast<double>(scores.size()) - positives;
  if (positives == 0 || negatives == 0)
    return make_error(errc::invalid_argument, "roc_auc: the labels hold only one class");
  return (rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives);
}

double log_loss_of_logits(const std::vector<float>& logits, const std::vector<float>& labels) {
  double total = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double p = std::clamp(1.0 / (1.0 + std::exp(-static_cast<double>(logits[i]))), 1e-7, 1.0 - 1e-7);
    total -= labels[i] > 0.5f ? std::log(p) : std::log(1.0 - p);
  }
  return logits.empty() ? 0.0 : total / static_cast<double>(logits.size());
}

}  // namespace cohort::apps
