// The MLP model.
#include "apps/models/mlp.hpp"

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

}  // namespace cohort::apps
