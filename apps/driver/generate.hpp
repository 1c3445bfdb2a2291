// Continuing a token sequence with a trained causal model (a language model's sampling): the
// model's forward pass on the serial executor for one sequence of the model's context length,
// the next token from the logits at the last filled position — greedy at temperature 0,
// otherwise sampled from softmax(logits / temperature) over the top_k most likely (0: all),
// seeded. The context is the last `context` tokens; the positions after them hold zeros, which
// a causal model does not look at.
//
//   auto model = [](graph& g) {        // a causal model: logits [1, 16, 256] from input "tokens" [1, 16]
//     return build_gpt(g, {.layers = 1, .d = 32, .heads = 2, .seq = 16}, /*batch=*/1).logits;
//   };
//   graph g;
//   model(g);
//   parameter_store trained = init_parameters(g, /*seed=*/0);   // or load_parameters("gpt.safetensors")
//   sampling s;
//   s.tokens = 40;  s.temperature = 0;   // greedy
//   auto out = continue_tokens(model, /*context=*/16, trained, {'T', 'h', 'e', ' '}, s);
//   if (!out) return out.error();        // a parameter missing from `trained`, a token out of range
//   assert(out->size() == 40);
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "graph/graph.hpp"
#include "graph/init.hpp"

namespace cohort::apps {

struct sampling {
  std::int64_t tokens = 64;  // new tokens
  double temperature = 1.0;  // 0: greedy
  std::int64_t top_k = 0;    // sample among the k most likely (0: every token)
  std::uint64_t seed = 0;
  int threads = 1;
};

/// `model` builds the logits [1, context, vocab] from an i32 input named "tokens" [1, context]
/// (other inputs, e.g. training targets, are zeros). Errors: an empty prompt, a token outside
/// the vocabulary, parameters that do not fit the model, a bad temperature or top_k.
result<std::vector<std::int32_t>> continue_tokens(const std::function<var(graph&)>& model, std::int64_t context,
                                                  const parameter_store& params, std::vector<std::int32_t> prompt,
                                                  const sampling& s);

}  // namespace cohort::apps
