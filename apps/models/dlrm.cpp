// The DLRM model.
#include "apps/models/dlrm.hpp"

#include <cmath>

#include "graph/dsl.hpp"

namespace cohort::apps {
namespace {

// x @ W + b with dlrm_s_pytorch.py's initialisation.
var dense_layer(var x, std::int64_t out, const std::string& name) {
  graph& g = *x.g;
  const std::int64_t in = x.shape().at(-1);
  var w = g.parameter(name + ".weight", {in, out},
                      init_spec::normal(static_cast<float>(std::sqrt(2.0 / static_cast<double>(in + out)))));
  var b = g.parameter(name + ".bias", {out}, init_spec::normal(static_cast<float>(std::sqrt(1.0 / out))));
  return bias_add(matmul(x, w), b);
}

}  // namespace

dlrm_model build_dlrm(graph& g, const dlrm_config& cfg, std::int64_t batch) {
  dlrm_model m;
  if (cfg.tables.empty()) {
    g.fail(make_error(errc::invalid_argument, "dlrm: at least one embedding table"));
    return m;
  }
  var h = g.input("dense", {batch, cfg.dense});
  std::vector<std::int64_t> bottom = cfg.bottom;
  bottom.push_back(cfg.dim);
  for (std::size_t i = 0; i < bottom.size(); ++i) h = relu(dense_layer(h, bottom[i], "bot.fc" + std::to_string(i + 1)));
  std::vector<var> features{reshape(h, {batch, 1, cfg.dim})};
  for (const auto& t : cfg.tables) {
    var table = g.parameter("emb." + t.input, {t.rows, cfg.dim},
                            init_spec::uniform(static_cast<float>(1.0 / std::sqrt(static_cast<double>(t.rows)))));
    const std::size_t index = static_cast<std::size_t>(&t - cfg.tables.data());
    const table_split split = index < cfg.per_table.size() ? cfg.per_table[index] : table_split{cfg.sharding};
    annotate_table(table, split.how, split.owner);
    var ids = g.input(t.input, {batch, t.bag}, dtype::i32);
    features.push_back(reshape(embedding_bag(table, ids, t.mean), {batch, 1, cfg.dim}));
  }
  var z = concat({h, pairwise_dot(concat(features, 1))}, 1);  // [B, dim + F(F-1)/2]
  for (std::size_t i = 0; i < cfg.top.size(); ++i)
    z = relu(dense_layer(z, cfg.top[i], "top.fc" + std::to_string(i + 1)));
  z = dense_layer(z, 1, "top.fc" + std::to_string(cfg.top.size() + 1));
  m.logits = reshape(z, {batch});
  m.loss = bce_with_logits(m.logits, g.input("label", {batch}));
  return m;
}

dlrm_config criteo_dlrm(const std::vector<std::int64_t>& table_rows) {
  dlrm_config c;
  for (std::size_t t = 0; t < table_rows.size(); ++t)
    c.tables.push_back({"c" + std::to_string(t + 1), table_rows[t], 1, false});
  return c;
}

}  // namespace cohort::apps
