// The GPT model.
#include "apps/models/gpt.hpp"

#include <string>

#include "graph/dsl.hpp"
#include "graph/layers.hpp"

namespace cohort::apps {

gpt_model build_gpt(graph& g, const gpt_config& c, std::int64_t batch) {
  gpt_model m;
  m.tokens = g.input("tokens", {batch, c.seq}, dtype::i32);
  m.targets = g.input("targets", {batch, c.seq}, dtype::i32);
  var pos = g.parameter("pos", {c.seq, c.d}, init_spec::zeros());
  var x = embed(m.tokens, c.vocab, c.d, "tok") + pos;  // [B,T,D]
  for (std::int64_t i = 0; i < c.layers; ++i) {
    auto _ = g.scope("block" + std::to_string(i));
    x = x + causal_self_attention(layer_norm(x, "ln1"), c.heads, "attn", c.fused_attention);
    x = x + linear(gelu(linear(layer_norm(x, "ln2"), 4 * c.d, "fc1", true, tp_style::column)), c.d, "fc2", true,
                   tp_style::row);
  }
  m.logits = linear(layer_norm(x, "ln"), c.vocab, "head", /*bias=*/false,
                    c.column_parallel_head ? tp_style::column : tp_style::none);
  m.loss = softmax_cross_entropy(m.logits, m.targets);
  return m;
}

}  // namespace cohort::apps
