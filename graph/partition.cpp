// Builds one stage's local program node by node from the serial graph.
#include "graph/partition.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "graph/dsl.hpp"

namespace cohort {
namespace {

int stage_of_node(const graph& g, const gradients& gr, const stage_assignment& sa, std::size_t i) {
  if (i < gr.backward_begin) return sa.of_forward_node[i];
  std::int32_t origin = g.nodes()[i].origin;
  return origin >= 0 ? sa.of_forward_node[static_cast<std::size_t>(origin)] : sa.stages - 1;
}

class local_builder {
 public:
  local_builder(const graph& g, const gradients& gr, const axis_completion& c, const stage_assignment& sa,
                int pipeline_rank, int pipeline_ranks, std::int64_t rank)
      : g_(g),
        gr_(gr),
        c_(c),
        sa_(sa),
        stage_(pipeline_rank),
        ranks_(pipeline_ranks),
        rank_(rank),
        local_(g.num_values()) {
    prog_.stage = pipeline_rank;
    prog_.stages = pipeline_ranks;
    prog_.tp_rank = rank;
    prog_.tp = c.degree;
  }

  result<stage_program> build();

 private:
  shape local_of(value_id v) const { return local_shape(g_.value(v).type.shape, c_.placement_of(v), c_.degree, rank_); }
  result<var> operand(value_id v, bool for_backward);
  result<var> reshard(var x, value_id v, const placement& to);
  op_attrs localized(const node& n) const;
  collective_attrs collective(const shard& s, std::int64_t extent) const {
    return collective_attrs{c_.axis, s.dim, extent, s.granule, c_.degree, rank_, s.owner};
  }
  collective_attrs allreduce_attrs() const { return collective_attrs{c_.axis, 0, 0, 1, c_.degree, rank_}; }
  int producer_stage(value_id v) const {
    auto p = g_.value(v).producer;
    return p < 0 ? -1 : stage_of_node(g_, gr_, sa_, static_cast<std::size_t>(p));
  }
  bool mine(int stage) const { return stage >= 0 && stage % ranks_ == stage_; }
  int chunk_of(int stage) const { return stage / ranks_; }
  /// Appends serial node i (on this rank) to the local program.
  status emit(std::size_t i, bool backward);
  /// The parameter gradients (and sparse tables' entries) computed so far, placed like their
  /// parameters: after each chunk's backward nodes, so that its task leaves them ready.
  status place_gradients();

  const graph& g_;
  const gradients& gr_;
  const axis_completion& c_;
  const stage_assignment& sa_;
  int stage_;  // the pipeline rank
  int ranks_;  // pipeline ranks: this one holds stages stage_, stage_ + ranks_, ...
  std::int64_t rank_;
  int chunk_ = 0;  // the chunk being built
  stage_program prog_;
  std::vector<var> local_;  // by serial value id
  std::map<std::pair<value_id, std::string>, var> resharded_;
};

result<var> local_builder::operand(value_id v, bool for_backward) {
  if (local_[static_cast<std::size_t>(v)].valid()) return local_[static_cast<std::size_t>(v)];
  const value_info& info = g_.value(v);
  var x;
  if (info.kind == value_kind::parameter) {
    x = prog_.g.parameter_piece(info.name, local_of(v), info.init);
    prog_.params.push_back({info.name, x.id, no_value, c_.placement_of(v)});
  } else if (info.kind == value_kind::input) {
    x = prog_.g.input(info.name, local_of(v), info.type.type);
    if (v == gr_.seed) {
      prog_.seed = x.id;
    } else {
      prog_.data_inputs.emplace_back(info.name, x.id);
      prog_.data_chunks.push_back(chunk_);
    }
  } else {
    int from = producer_stage(v);
    x = prog_.g.input("recv." + std::to_string(v), local_of(v), info.type.type);
    prog_.recvs.push_back({v, from, x.id, for_backward, chunk_, from % ranks_});
  }
  if (auto st = prog_.g.check(); !st) return st.error();
  local_[static_cast<std::size_t>(v)] = x;
  return x;
}

result<var> local_builder::reshard(var x, value_id v, const placement& to) {
  const placement& from = c_.placement_of(v);
  if (from == to) return x;
  auto key = std::make_pair(v, to_string(to));
  if (auto it = resharded_.find(key); it != resharded_.end()) return it->second;
  const shape& full = g_.value(v).type.shape;
  var out;
  const shard* sf = as_shard(from);
  const shard* st = as_shard(to);
  if (is_replicate(from) && st != nullptr) {
    range r = shard_part(*st, full[st->dim], c_.degree, rank_);
    out = slice(x, st->dim, r.begin, r.end);
  } else if (sf != nullptr && is_replicate(to)) {
    out = prog_.g.apply1(op_kind::all_gather, collective(*sf, full[sf->dim]), {x});
  } else if (is_partial(from) && is_replicate(to)) {
    out = prog_.g.apply1(op_kind::allreduce, allreduce_attrs(), {x});
  } else if (is_partial(from) && st != nullptr) {
    out = prog_.g.apply1(op_kind::reduce_scatter, collective(*st, full[st->dim]), {x});
  } else if (sf != nullptr && st != nullptr) {
    var whole = prog_.g.apply1(op_kind::all_gather, collective(*sf, full[sf->dim]), {x});
    range r = shard_part(*st, full[st->dim], c_.degree, rank_);
    out = slice(whole, st->dim, r.begin, r.end);
  } else {
    return make_error(errc::unsupported, "partition: cannot change value %" + std::to_string(v) + " from " +
                                             to_string(from) + " to " + to_string(to));
  }
  if (auto s = prog_.g.check(); !s) return s.error();
  resharded_.emplace(key, out);
  return out;
}

op_attrs local_builder::localized(const node& n) const {
  switch (n.kind) {
    case op_kind::reshape:
    case op_kind::sum_to:
    case op_kind::broadcast_to:
    case op_kind::embedding_grad:
      return shape_attrs{local_of(n.outputs[0])};
    case op_kind::embedding_bag_grad: {  // the rank's piece of the table
      bag_attrs a = std::get<bag_attrs>(n.attrs);
      a.table = local_of(n.outputs[0]);
      return a;
    }
    case op_kind::embedding_bag:  // a row shard looks up the ids it holds
      if (const shard* s = as_shard(c_.placement_of(n.inputs[0])); s != nullptr && s->dim == 0) {
        bag_attrs a = std::get<bag_attrs>(n.attrs);
        const std::int64_t rows = g_.value(n.inputs[0]).type.shape[0];
        a.first_row = shard_part(*s, rows, c_.degree, rank_).begin;
        a.all_rows = rows;
        return a;
      }
      return n.attrs;
    default:
      return n.attrs;
  }
}

status local_builder::emit(std::size_t i, bool backward) {
  const node& n = g_.nodes()[i];
  std::vector<var> operands;
  for (std::size_t j = 0; j < n.inputs.size(); ++j) {
    auto x = operand(n.inputs[j], backward);
    if (!x) return x.error();
    auto y = reshard(*x, n.inputs[j], c_.required[i][j]);
    if (!y) return y.error();
    operands.push_back(*y);
  }
  auto outs = prog_.g.apply(n.kind, localized(n), operands);
  if (auto st = prog_.g.check(); !st)
    return make_error(st.error().code, "partition: node " + std::to_string(i) + " on stage " +
                                           std::to_string(stage_of_node(g_, gr_, sa_, i)) + ", tp rank " +
                                           std::to_string(rank_) + ": " + st.error().message);
  for (std::size_t k = 0; k < n.outputs.size(); ++k) {
    shape expected = local_of(n.outputs[k]);
    if (outs[k].shape() != expected)
      return make_error(errc::shape_mismatch,
                        "partition: node " + std::to_string(i) + " (" + to_string(n.kind) + ") computes " +
                            outs[k].shape().to_string() + " locally where its placement " +
                            to_string(c_.placement_of(n.outputs[k])) + " means " + expected.to_string());
    local_[static_cast<std::size_t>(n.outputs[k])] = outs[k];
  }
  return {};
}

status local_builder::place_gradients() {
  for (auto [p, d] : gr_.param_grads) {
    var lp = local_[static_cast<std::size_t>(p)];
    if (!lp.valid()) continue;  // another stage's parameter
    var ld = local_[static_cast<std::size_t>(d)];
    if (!ld.valid()) continue;  // not computed yet (a later chunk), or elsewhere (refused at the end)
    for (auto& prm : prog_.params) {
      if (prm.local != lp.id || prm.grad != no_value) continue;
      auto placed = reshard(ld, d, c_.placement_of(p));
      if (!placed) return placed.error();
      prm.grad = placed->id;
    }
  }
  // Sparse table gradients: entries, their values sliced like the table's columns.
  for (const auto& sg : gr_.sparse_grads) {
    var lp = local_[static_cast<std::size_t>(sg.param)];
    if (!lp.valid()) continue;
    var rows = local_[static_cast<std::size_t>(sg.rows)], values = local_[static_cast<std::size_t>(sg.values)];
    if (!rows.valid() || !values.valid()) continue;
    for (auto& prm : prog_.params) {
      if (prm.local != lp.id || prm.sparse()) continue;
      const placement& table = c_.placement_of(sg.param);
      const shard* sh = as_shard(table);
      // split by rows: the entries stay whole (global rows); the owner keeps those it holds
      const bool by_rows = sh != nullptr && sh->dim == 0;
      auto placed_values = by_rows ? result<var>(values) : reshard(values, sg.values, table);
      if (!placed_values) return placed_values.error();
      prm.sparse_rows = rows.id;
      prm.sparse_values = placed_values->id;
      if (by_rows) prm.sparse_first_row = shard_part(*sh, g_.value(sg.param).type.shape[0], c_.degree, rank_).begin;
    }
  }
  return {};
}

result<stage_program> local_builder::build() {
  const auto& nodes = g_.nodes();
  std::vector<int> my_stages;
  for (int st = stage_; st < sa_.stages; st += ranks_) my_stages.push_back(st);
  prog_.chunks.resize(my_stages.size());
  // forward: chunk by chunk in stage order
  for (std::size_t c = 0; c < my_stages.size(); ++c) {
    chunk_ = static_cast<int>(c);
    prog_.chunks[c].stage = my_stages[c];
    prog_.chunks[c].forward_begin = prog_.g.nodes().size();
    for (std::size_t i = 0; i < gr_.backward_begin; ++i)
      if (stage_of_node(g_, gr_, sa_, i) == my_stages[c])
        if (auto st = emit(i, false); !st) return st.error();
    prog_.chunks[c].forward_end = prog_.g.nodes().size();
  }
  prog_.backward_begin = prog_.g.nodes().size();
  // backward: chunk by chunk in reverse, each followed by the gradients it completes
  for (std::size_t c = my_stages.size(); c-- > 0;) {
    chunk_ = static_cast<int>(c);
    prog_.chunks[c].backward_begin = prog_.g.nodes().size();
    for (std::size_t i = gr_.backward_begin; i < nodes.size(); ++i)
      if (stage_of_node(g_, gr_, sa_, i) == my_stages[c])
        if (auto st = emit(i, true); !st) return st.error();
    if (auto st = place_gradients(); !st) return st.error();
    prog_.chunks[c].backward_end = prog_.g.nodes().size();
  }
  for (const auto& prm : prog_.params) {
    if (prm.grad != no_value || prm.sparse()) continue;
    const value_id p = g_.find(prm.name);
    const bool sparse =
        std::any_of(gr_.sparse_grads.begin(), gr_.sparse_grads.end(), [&](const auto& sg) { return sg.param == p; });
    if (sparse)
      return make_error(errc::invalid_argument, "partition: the sparse gradient of '" + prm.name +
                                                    "' is computed on another stage than the table");
    bool computed_elsewhere = false;
    for (auto [q, d] : gr_.param_grads)
      if (q == p) computed_elsewhere = true;
    if (computed_elsewhere)
      return make_error(
          errc::invalid_argument,
          "partition: the gradient of '" + prm.name +
              "' is computed on another stage than the parameter (tied weights across stages are not supported)");
    return make_error(errc::invalid_argument, "partition: parameter '" + prm.name + "' is read on stage " +
                                                  std::to_string(stage_) +
                                                  " but differentiated elsewhere (shared across stages)");
  }

  // Values this rank produces for other ranks: sent after the task that computes them.
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const int consumer = stage_of_node(g_, gr_, sa_, i);
    if (mine(consumer)) continue;
    for (auto v : nodes[i].inputs) {
      const int producer = producer_stage(v);
      if (g_.value(v).producer < 0 || !mine(producer)) continue;
      const int to = consumer % ranks_;
      bool known = std::any_of(prog_.sends.begin(), prog_.sends.end(),
                               [&](const auto& s) { return s.serial == v && s.peer_rank == to; });
      if (!known)
        prog_.sends.push_back({v, consumer, local_[static_cast<std::size_t>(v)].id,
                               static_cast<std::size_t>(g_.value(v).producer) >= gr_.backward_begin, chunk_of(producer),
                               to});
    }
  }
  if (mine(producer_stage(gr_.loss))) {
    prog_.loss = local_[static_cast<std::size_t>(gr_.loss)].id;
    prog_.loss_chunk = chunk_of(producer_stage(gr_.loss));
  }
  return std::move(prog_);
}

}  // namespace

result<stage_program> partition(const graph& g, const gradients& gr, const axis_completion& tp,
                                const stage_assignment& stages, int stage, std::int64_t tp_rank, int pipeline_ranks) {
  const int ranks = pipeline_ranks > 0 ? pipeline_ranks : stages.stages;
  if (ranks > stages.stages || stages.stages % ranks != 0)
    return make_error(errc::invalid_argument, "partition: " + std::to_string(stages.stages) +
                                                  " stages do not divide over " + std::to_string(ranks) +
                                                  " pipeline ranks");
  if (stage < 0 || stage >= ranks || tp_rank < 0 || tp_rank >= tp.degree)
    return make_error(errc::invalid_argument, "partition: stage " + std::to_string(stage) + " or tp rank " +
                                                  std::to_string(tp_rank) + " out of range");
  if (stages.of_forward_node.size() != gr.backward_begin)
    return make_error(errc::invalid_argument, "partition: the stage assignment does not cover the forward nodes");
  local_builder b(g, gr, tp, stages, stage, ranks, tp_rank);
  return b.build();
}

shape local_shape(const shape& s, const placement& p, std::int64_t parts, std::int64_t index) {
  const shard* sh = as_shard(p);
  if (sh == nullptr) return s;
  shape out = s;
  out[sh->dim] = shard_part(*sh, s[sh->dim], parts, index).size();
  return out;
}

std::vector<value_id> stage_program::kept() const {
  std::vector<value_id> out;
  for (const auto& s : sends) out.push_back(s.local);
  if (loss != no_value) out.push_back(loss);
  for (const auto& p : params) {
    if (p.grad != no_value) out.push_back(p.grad);
    if (p.sparse()) {
      out.push_back(p.sparse_rows);
      out.push_back(p.sparse_values);
    }
  }
  return out;
}

result<stage_assignment> stages_from_cuts(const graph& g, const gradients& gr, const std::vector<std::size_t>& cuts) {
  (void)g;
  stage_assignment sa;
  sa.stages = static_cast<int>(cuts.size()) + 1;
  std::size_t prev = 0;
  for (std::size_t c : cuts) {
    if (c <= prev || c >= gr.backward_begin)
      return make_error(errc::invalid_argument, "stage cuts must increase strictly inside (0, " +
                                                    std::to_string(gr.backward_begin) + "): got " + std::to_string(c));
    prev = c;
  }
  sa.of_forward_node.resize(gr.backward_begin);
  int stage = 0;
  for (std::size_t i = 0; i < gr.backward_begin; ++i) {
    while (stage < static_cast<int>(cuts.size()) && i >= cuts[static_cast<std::size_t>(stage)]) ++stage;
    sa.of_forward_node[i] = stage;
  }
  return sa;
}

}  // namespace cohort
