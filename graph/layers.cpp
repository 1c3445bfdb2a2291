// Layers built from DSL ops.
#include "graph/layers.hpp"

#include <cmath>

namespace cohort {

const char* to_string(table_sharding s) {
  switch (s) {
    case table_sharding::replicated:
      return "replicated";
    case table_sharding::column:
      return "column";
    case table_sharding::row:
      return "row";
    case table_sharding::table:
      return "table";
  }
  return "?";
}

std::optional<table_sharding> parse_table_sharding(std::string_view s) {
  for (auto k : {table_sharding::replicated, table_sharding::column, table_sharding::row, table_sharding::table})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

void annotate_table(var table, table_sharding how, int owner) {
  switch (how) {
    case table_sharding::replicated:
      break;
    case table_sharding::column:
      annotate(table, "tp", shard{1});
      break;
    case table_sharding::row:
      annotate(table, "tp", shard{0});
      break;
    case table_sharding::table:
      annotate(table, "tp", shard{0, 1, owner >= 0 ? owner : shard::one_part});
      break;
  }
}

var linear(var x, std::int64_t out_features, const std::string& name, bool bias, tp_style style, std::int64_t granule) {
  if (!x.valid()) return var{};
  graph& g = *x.g;
  auto _ = g.scope(name);
  std::int64_t in_features = x.shape().at(-1);
  float bound = 1.f / std::sqrt(static_cast<float>(in_features));
  var w = g.parameter("weight", {in_features, out_features}, init_spec::uniform(bound));
  if (style == tp_style::column) g.annotate(w, "tp", shard{1, granule});
  if (style == tp_style::row) g.annotate(w, "tp", shard{0, granule});
  var y = matmul(x, w);
  if (!bias) return y;
  var b = g.parameter("bias", {out_features}, init_spec::uniform(bound));
  if (style == tp_style::column) g.annotate(b, "tp", shard{0, granule});
  return bias_add(y, b);
}

var layer_norm(var x, const std::string& name, float eps) {
  if (!x.valid()) return var{};
  graph& g = *x.g;
  auto _ = g.scope(name);
  std::int64_t c = x.shape().at(-1);
  var gamma = g.parameter("weight", {c}, init_spec::ones());
  var beta = g.parameter("bias", {c}, init_spec::zeros());
  return layernorm(x, gamma, beta, eps);
}

var embed(var ids, std::int64_t vocab, std::int64_t dim, const std::string& name) {
  if (!ids.valid()) return var{};
  graph& g = *ids.g;
  auto _ = g.scope(name);
  var table = g.parameter("weight", {vocab, dim}, init_spec::normal(1.f));
  return embedding(table, ids);
}

var causal_self_attention(var x, std::int64_t heads, const std::string& name, bool fused) {
  if (!x.valid()) return var{};
  graph& g = *x.g;
  const shape& s = x.shape();
  if (s.rank() != 3 || heads <= 0 || s[2] % heads != 0) {
    g.fail(make_error(errc::shape_mismatch, "causal_self_attention '" + g.scoped_name(name) +
                                                "': x must be [B,T,D] with D divisible by heads=" +
                                                std::to_string(heads) + ", got " + s.to_string()));
    return var{};
  }
  auto _ = g.scope(name);
  std::int64_t b = s[0], t = s[1], d = s[2], dh = d / heads;
  auto split_heads = [&](var v) { return permute(reshape(v, {b, t, heads, dh}), {0, 2, 1, 3}); };
  var q = split_heads(linear(x, d, "q", true, tp_style::column, dh));  // [B,H,T,Dh]
  var k = split_heads(linear(x, d, "k", true, tp_style::column, dh));
  var v = split_heads(linear(x, d, "v", true, tp_style::column, dh));
  const float scores_scale = 1.f / std::sqrt(static_cast<float>(dh));
  var heads_out;  // [B,H,T,Dh]
  if (fused) {
    heads_out = attention(q, k, v, scores_scale, /*causal=*/true);
  } else {
    var att = softmax(causal_mask(scale(matmul(q, k, false, true), scores_scale), -INFINITY));  // [B,H,T,T]
    heads_out = matmul(att, v);
  }
  var y = reshape(permute(heads_out, {0, 2, 1, 3}), {b, t, d});  // [B,T,D]
  return linear(y, d, "proj", true, tp_style::row, dh);
}

}  // namespace cohort
