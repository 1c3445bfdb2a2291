// Model definitions.
#include "apps/models.hpp"

#include <string>

#include "graph/dsl.hpp"
#include "graph/layers.hpp"

namespace cohort::apps {

mlp_model build_mlp(graph& g, const std::vector<std::int64_t>& dims, std::int64_t batch) {
  mlp_model m;
  if (dims.size() < 2) {
    g.fail(make_error(errc::invalid_argument, "mlp: --model.dims needs at least an input and an output width"));
    return m;
  }
  m.x = g.input("x", {batch, dims.front()});
  m.y = g.input("y", {batch}, dtype::i32);
  var h = m.x;
  // Tensor parallelism: Megatron pairs, column-parallel then row-parallel; with an odd
  // number of layers the last stays replicated.
  const std::size_t layers = dims.size() - 1;
  for (std::size_t i = 1; i <= layers; ++i) {
    bool paired = (i % 2 == 1) ? i < layers : true;
    tp_style style = !paired ? tp_style::none : (i % 2 == 1 ? tp_style::column : tp_style::row);
    h = linear(h, dims[i], "fc" + std::to_string(i), true, style);
    if (i < layers) h = relu(h);
  }
  m.logits = h;
  m.loss = softmax_cross_entropy(h, m.y);
  return m;
}

gpt_model build_gpt(graph& g, const gpt_config& c, std::int64_t batch) {
  gpt_model m;
  m.tokens = g.input("tokens", {batch, c.seq}, dtype::i32);
  m.targets = g.input("targets", {batch, c.seq}, dtype::i32);
  var pos = g.parameter("pos", {c.seq, c.d}, init_spec::zeros());
  var x = embed(m.tokens, c.vocab, c.d, "tok") + pos;  // [B,T,D]
  for (std::int64_t i = 0; i < c.layers; ++i) {
    auto _ = g.scope("block" + std::to_string(i));
    x = x + causal_self_attention(layer_norm(x, "ln1"), c.heads, "attn");
    x = x + linear(gelu(linear(layer_norm(x, "ln2"), 4 * c.d, "fc1", true, tp_style::column)), c.d, "fc2", true,
                   tp_style::row);
  }
  m.logits = linear(layer_norm(x, "ln"), c.vocab, "head", /*bias=*/false);
  m.loss = softmax_cross_entropy(m.logits, m.targets);
  return m;
}

}  // namespace cohort::apps
