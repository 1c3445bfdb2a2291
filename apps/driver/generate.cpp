// Autoregressive continuation on the serial executor.
#include "apps/driver/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/dispatch.hpp"
#include "kernels/executor.hpp"
#include "kernels/thread_pool.hpp"

namespace cohort::apps {

result<std::vector<std::int32_t>> continue_tokens(const std::function<var(graph&)>& model, std::int64_t context,
                                                  const parameter_store& params, std::vector<std::int32_t> prompt,
                                                  const sampling& s) {
  if (prompt.empty()) return make_error(errc::invalid_argument, "--generate.prompt is empty");
  if (s.tokens < 0) return make_error(errc::invalid_argument, "--generate.tokens must not be negative");
  if (!(s.temperature >= 0) || !std::isfinite(s.temperature))
    return make_error(errc::invalid_argument, "--generate.temperature must be 0 (greedy) or positive");
  if (s.top_k < 0) return make_error(errc::invalid_argument, "--generate.top-k must not be negative");
  graph g;
  var logits = model(g);
  if (auto st = g.check(); !st) return st.error();
  const value_id tokens = g.find("tokens");
  if (tokens == no_value || g.value(tokens).type.shape != shape({1, context}))
    return make_error(errc::invalid_argument,
                      "the model has no input 'tokens' shaped [1," + std::to_string(context) + "]");
  const shape& ls = logits.shape();
  if (ls.rank() != 3 || ls[0] != 1 || ls[1] != context)
    return make_error(errc::invalid_argument,
                      "the model's logits are " + ls.to_string() + ", not [1," + std::to_string(context) + ",vocab]");
  const std::int64_t vocab = ls[2];
  for (std::int32_t t : prompt)
    if (t < 0 || t >= vocab)
      return make_error(errc::invalid_argument,
                        "prompt token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(vocab));
  for (value_id p : g.parameters()) {
    auto it = params.find(g.value(p).name);
    if (it == params.end())
      return make_error(errc::invalid_argument, "the parameters have no '" + g.value(p).name + "'");
    if (it->second.shape() != g.value(p).type.shape)
      return make_error(errc::shape_mismatch, "parameter '" + g.value(p).name + "' is " +
                                                  it->second.shape().to_string() + ", the model's is " +
                                                  g.value(p).type.shape.to_string());
  }
  kernels::dispatch_table table = kernels::cpu_kernels();
  kernels::thread_pool pool(std::max(1, s.threads));
  auto ex = kernels::executor::create(g, params, {logits.id}, {.kernels = &table, .pool = &pool});
  if (!ex) return ex.error();
  for (value_id in : g.inputs()) ex->input(in).fill(0.f);  // training targets and the like: zeros
  std::mt19937_64 rng(s.seed);
  std::vector<std::int32_t> out;
  std::vector<double> p(static_cast<std::size_t>(vocab));
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  for (std::int64_t n = 0; n < s.tokens; ++n) {
    const std::int64_t have = std::min<std::int64_t>(static_cast<std::int64_t>(prompt.size()), context);
    tensor& in = ex->input(tokens);
    std::int32_t* slot = in.data<std::int32_t>();
    std::fill(slot, slot + context, 0);
    std::copy(prompt.end() - have, prompt.end(), slot);
    if (auto st = ex->run(); !st) return st.error();
    const float* row = ex->value(logits.id).data<float>() + (have - 1) * vocab;
    std::int32_t next = 0;
    if (s.temperature == 0) {
      next = static_cast<std::int32_t>(std::max_element(row, row + vocab) - row);
    } else {
      std::iota(order.begin(), order.end(), 0);
      const std::int64_t k = s.top_k > 0 ? std::min(s.top_k, vocab) : vocab;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
      const double top = row[order[0]];
      double total = 0;
      for (std::int64_t i = 0; i < k; ++i)
        total += p[static_cast<std::size_t>(i)] = std::exp((row[order[i]] - top) / s.temperature);
      // a uniform draw in [0, 1) from the top 53 bits: the same sequence on every platform
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
      double acc = 0;
      next = order[static_cast<std::size_t>(k - 1)];
      for (std::int64_t i = 0; i < k; ++i)
        if ((acc += p[static_cast<std::size_t>(i)]) > u) {
          next = order[static_cast<std::size_t>(i)];
          break;
        }
    }
    out.push_back(next);
    prompt.push_back(next);
  }
  return out;
}

}  // namespace cohort::apps
