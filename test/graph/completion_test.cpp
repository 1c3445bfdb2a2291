// Completion: the Megatron layout comes out of annotations on the weights alone — for an
// MLP block and an attention block, forward and backward — including uneven shards.
#include <doctest/doctest.h>

#include <map>

#include "graph/autodiff.hpp"
#include "graph/completion.hpp"
#include "graph/dsl.hpp"
#include "graph/layers.hpp"

using namespace cohort;

namespace {

std::string p(const axis_completion& c, var v) { return to_string(c.placement_of(v.id)); }

// Counts the nodes whose operand `req` differs from the operand's placement, by the
// communication it implies: "allreduce" (P -> R), "all_gather" (S -> R), "reduce_scatter"
// (P -> S), "slice" (R -> S).
std::map<std::string, int> reshards(const graph& g, const axis_completion& c, std::size_t begin, std::size_t end) {
  std::map<std::string, int> out;
  for (std::size_t i = begin; i < end; ++i)
    for (std::size_t j = 0; j < g.nodes()[i].inputs.size(); ++j) {
      const placement& have = c.placement_of(g.nodes()[i].inputs[j]);
      const placement& need = c.required[i][j];
      if (have == need) continue;
      if (is_partial(have) && is_replicate(need))
        ++out["allreduce"];
      else if (as_shard(have) && is_replicate(need))
        ++out["all_gather"];
      else if (is_partial(have) && as_shard(need))
        ++out["reduce_scatter"];
      else if (is_replicate(have) && as_shard(need))
        ++out["slice"];
      else
        ++out["other"];
    }
  return out;
}

}  // namespace

TEST_CASE("a Megatron MLP block: column-parallel then row-parallel, one allreduce forward") {
  graph g;
  var x = g.input("x", {8, 16});
  var h = linear(x, 64, "fc1", true, tp_style::column);
  var a = gelu(h);
  var y = linear(a, 16, "fc2", true, tp_style::row);
  var loss = mean(y * y);
  auto gr = autodiff(g, loss);
  REQUIRE(gr.ok());
  std::size_t forward_end = gr->backward_begin;
  auto c = complete_axis(g, "tp", 2);
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  CHECK(p(*c, x) == "R");
  CHECK(p(*c, h) == "S(1)");
  CHECK(p(*c, a) == "S(1)");
  CHECK(p(*c, y) == "R");  // the bias add needed the partial sum made whole
  CHECK(to_string(c->placement_of(g.find("fc1.weight"))) == "S(1)");
  CHECK(to_string(c->placement_of(g.find("fc1.bias"))) == "S(0)");
  CHECK(to_string(c->placement_of(g.find("fc2.weight"))) == "S(0)");
  CHECK(to_string(c->placement_of(g.find("fc2.bias"))) == "R");
  // forward: exactly one allreduce (the row-parallel output before its bias), no gathers
  auto fwd = reshards(g, *c, 0, forward_end);
  CHECK(fwd == std::map<std::string, int>{{"allreduce", 1}});
  // backward: every weight gradient lands where its weight lives; none needs fixing
  for (auto [param, grad] : gr->param_grads) {
    CAPTURE(g.value(param).name);
    CHECK(c->placement_of(grad) == c->placement_of(param));
  }
  CHECK(gradient_fixups(g, *gr, *c).empty());
}

TEST_CASE("a partial gradient meeting a sharded weight is summed once, not carried into the weight gradients") {
  // a column-parallel output layer after a Megatron pair: its input gradient is a partial sum
  // (the contraction runs over the split vocabulary); summed at once, the weight gradients
  // below it land where their weights live, as with a replicated head (carried on partial,
  // every one of them came out partial and was summed whole: a weight-sized allreduce each)
  graph g;
  var x = g.input("x", {8, 16});
  var h = linear(gelu(linear(x, 64, "fc1", true, tp_style::column)), 16, "fc2", true, tp_style::row);
  var logits = linear(h, 32, "head", false, tp_style::column);
  var loss = softmax_cross_entropy(logits, g.input("y", {8}, dtype::i32));
  auto gr = autodiff(g, loss);
  REQUIRE(gr.ok());
  auto c = complete_axis(g, "tp", 2);
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  CHECK(p(*c, logits) == "S(1)");
  auto grad_of = [&](const char* name) {
    for (auto [param, grad] : gr->param_grads)
      if (g.value(param).name == name) return to_string(c->placement_of(grad));
    return std::string("none");
  };
  CHECK(grad_of("fc1.weight") == "S(1)");
  CHECK(grad_of("fc1.bias") == "S(0)");
  CHECK(grad_of("fc2.weight") == "S(0)");
  // still greedy (docs/planner.md): the loss's gradient is whole, so the head's weight gradient
  // is computed whole and sliced, and fc2's bias gradient summed at the end
  CHECK(grad_of("head.weight") == "R");
  CHECK(grad_of("fc2.bias") == "P");
  // backward: the head's input gradient summed once, fc1's input gradient summed once
  auto bwd = reshards(g, *c, gr->backward_begin, g.nodes().size());
  CHECK(bwd["allreduce"] == 2);
  CHECK(bwd["all_gather"] == 1);  // the logits, whole for the loss's gradient
}

TEST_CASE("an attention block: heads split over tp, one allreduce forward, whole-head granules") {
  graph g;
  var x = g.input("x", {2, 8, 32});  // B, T, D with 4 heads of 8
  var y = causal_self_attention(x, 4, "attn");
  var loss = mean(y * y);
  auto gr = autodiff(g, loss);
  REQUIRE(gr.ok());
  for (std::int64_t degree : {2, 3}) {  // 3 ranks: heads split 2, 1, 1
    CAPTURE(degree);
    auto c = complete_axis(g, "tp", degree);
    REQUIRE_MESSAGE(c.ok(), c.error().message);
    CHECK(to_string(c->placement_of(g.find("attn.q.weight"))) == "S(1/8)");
    CHECK(to_string(c->placement_of(g.find("attn.proj.weight"))) == "S(0/8)");
    // follow the forward chain: q [B,T,D] S(2/8) -> [B,T,H,Dh] S(2) -> [B,H,T,Dh] S(1)
    std::map<op_kind, std::vector<std::string>> seen;
    for (std::size_t i = 0; i < gr->backward_begin; ++i) {
      const node& n = g.nodes()[i];
      seen[n.kind].push_back(to_string(c->placement_of(n.outputs[0])));
    }
    CHECK(seen[op_kind::permute][0] == "S(1)");  // q split by heads: [B,H,T,Dh]
    CHECK(seen[op_kind::softmax][0] == "S(1)");  // attention probabilities per head
    CHECK(seen[op_kind::causal_mask][0] == "S(1)");
    CHECK(seen[op_kind::matmul].back() == "P");    // the row-parallel projection
    CHECK(seen[op_kind::bias_add].back() == "R");  // after the allreduce
    auto fwd = reshards(g, *c, 0, gr->backward_begin);
    CHECK(fwd == std::map<std::string, int>{{"allreduce", 1}});
    CHECK(gradient_fixups(g, *gr, *c).empty());
  }
}

TEST_CASE("without annotations everything stays replicated") {
  graph g;
  var x = g.input("x", {4, 8});
  var loss = mean(relu(linear(x, 8, "fc")));
  auto gr = autodiff(g, loss);
  REQUIRE(gr.ok());
  auto c = complete_axis(g, "tp", 4);
  REQUIRE(c.ok());
  for (std::size_t v = 0; v < g.num_values(); ++v) CHECK(is_replicate(c->values[v]));
  CHECK(c->reshards == 0);
}

TEST_CASE("tables annotated whole on one rank are balanced over the ranks by size, largest first") {
  graph g;
  var ids = g.input("ids", {4, 1}, dtype::i32);
  std::vector<std::pair<std::string, std::int64_t>> tables{{"a", 30}, {"b", 100}, {"c", 50}, {"d", 45}, {"e", 2}};
  var sum;
  for (const auto& [name, rows] : tables) {
    var t = g.parameter(name, {rows, 8}, init_spec::zeros());
    annotate(t, "tp", shard{0, 1, shard::one_part});
    var pooled = embedding_bag(t, ids, false);
    sum = sum.valid() ? sum + pooled : pooled;
  }
  auto loss = mean(relu(sum));  // relu needs the whole sum
  auto gr = autodiff(g, loss);
  REQUIRE(gr.ok());
  auto c = complete_axis(g, "tp", 2);
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  // b (100) -> 0, c (50) -> 1, d (45) -> 1 (50 < 100), a (30) -> 0 (95 < 130), e (2) -> 0 (130 = 130: the lower)
  std::map<std::string, std::string> got;
  for (const auto& [name, rows] : tables) got[name] = to_string(c->placement_of(g.find(name)));
  CHECK(got == std::map<std::string, std::string>{
                   {"a", "S(0@1)"}, {"b", "S(0@0)"}, {"c", "S(0@1)"}, {"d", "S(0@1)"}, {"e", "S(0@0)"}});
  // a rank's lookups of tables it does not hold are zeros: the pooled outputs are partial sums
  auto fwd = reshards(g, *c, 0, gr->backward_begin);
  CHECK(fwd.count("allreduce") == 1);
  // any extent goes whole on one rank, even one row; an owner beyond the ranks is an error
  var one = g.parameter("one", {1, 8}, init_spec::zeros());
  annotate(one, "tp", shard{0, 1, 3});
  CHECK(complete_axis(g, "tp", 3).error().message == "'one': owner 3 out of range for 3 ranks");
  annotate(one, "tp", shard{0, 1, 2});
  CHECK(complete_axis(g, "tp", 3).ok());
}

TEST_CASE("bad annotations are errors naming the value") {
  graph g;
  var x = g.input("x", {4, 8});
  var w = g.parameter("w", {8, 2}, init_spec::zeros());
  annotate(w, "tp", shard{1});
  var y = matmul(x, w);
  (void)y;
  CHECK(complete_axis(g, "tp", 3).error().message ==
        "'w' [8,2]: dimension 1 has 2 units, fewer than the 3 ranks to shard it over");
  annotate(w, "tp", shard{2});
  CHECK(complete_axis(g, "tp", 2).error().message == "'w': shard dimension 2 out of range for [8,2]");
  annotate(w, "tp", shard{0, 3});
  CHECK(complete_axis(g, "tp", 2).error().message == "'w': granule 3 does not divide extent 8");
  CHECK(complete_axis(g, "tp", 1).ok());  // degree 1: annotations do not matter
}
