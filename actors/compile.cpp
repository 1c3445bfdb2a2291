// Plan compilation.
#include "actors/compile.hpp"

#include "planner/analysis.hpp"
#include "planner/rank_layout.hpp"
#include "planner/search.hpp"

namespace cohort::actors {

namespace {

// Two programs of one model at micro-batch sizes one row apart must be the same program but
// for their shapes: the same parameters, inputs, transfers and value ids (workers run either
// with the same buffers and tags).
status same_structure(const stage_program& a, const stage_program& b) {
  auto differ = [&](const char* what) {
    return make_error(errc::invalid_argument, std::string("the model's graph depends on the micro-batch size (") +
                                                  what + " of stage " + std::to_string(a.stage) +
                                                  " differ between its two shares): give a batch that splits evenly");
  };
  if (a.g.nodes().size() != b.g.nodes().size() || a.backward_begin != b.backward_begin) return differ("the nodes");
  if (a.loss != b.loss || a.seed != b.seed || a.data_inputs != b.data_inputs) return differ("the inputs");
  if (a.params.size() != b.params.size()) return differ("the parameters");
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    const auto &p = a.params[i], &q = b.params[i];
    if (p.name != q.name || p.local != q.local || p.grad != q.grad || p.sparse_rows != q.sparse_rows ||
        p.sparse_values != q.sparse_values || a.g.value(p.local).type.shape != b.g.value(q.local).type.shape)
      return differ("the parameters");
  }
  auto same_transfers = [](const std::vector<stage_program::transfer>& x,
                           const std::vector<stage_program::transfer>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].serial != y[i].serial || x[i].peer_stage != y[i].peer_stage || x[i].local != y[i].local ||
          x[i].backward != y[i].backward || x[i].chunk != y[i].chunk || x[i].peer_rank != y[i].peer_rank)
        return false;
    return true;
  };
  if (!same_transfers(a.recvs, b.recvs) || !same_transfers(a.sends, b.sends)) return differ("the transfers");
  return {};
}

// The serial training graph at `rows` rows per micro-batch, its tensor-parallel completion
// and (given the cuts) its stages.
status build_shape(shaped_graph& out, const model_fn& model, std::int64_t rows, const planner::parallel_plan& plan,
                   compile_options options) {
  out.micro_batch = rows;
  out.serial = std::make_unique<graph>();
  var loss = model(*out.serial, rows);
  if (auto st = out.serial->check(); !st) return st.error();
  auto gr = autodiff(*out.serial, loss, {.sparse_tables = options.sparse_tables});
  if (!gr) return gr.error();
  out.grads = *gr;
  auto tp = complete_axis(*out.serial, "tp", plan.tp);
  if (!tp) return make_error(tp.error().code, "plan tp=" + std::to_string(plan.tp) + ": " + tp.error().message);
  out.tp = std::move(*tp);
  return {};
}

status cut_stages(shaped_graph& g, const planner::parallel_plan& plan, const std::vector<std::size_t>& cuts) {
  auto st = stages_from_cuts(*g.serial, g.grads, cuts);
  if (!st) return make_error(st.error().code, "plan pp=" + std::to_string(plan.pp) + ": " + st.error().message);
  if (st->stages != plan.stages())
    return make_error(errc::invalid_argument,
                      "plan pp=" + std::to_string(plan.pp) +
                          (plan.virtual_stages > 1 ? " x " + std::to_string(plan.virtual_stages) + " virtual stages"
                                                   : std::string()) +
                          " but " + std::to_string(st->stages) + " stages were cut");
  g.stages = std::move(*st);
  return {};
}

}  // namespace

result<stage_program> compiled_model::program(int stage, int tp_rank) const {
  return partition(*serial, grads, tp, stages, stage, tp_rank, plan.pp);
}

result<stage_program> compiled_model::program(int stage, int tp_rank, std::int64_t rows) const {
  if (rows == micro_batch) return program(stage, tp_rank);
  if (smaller && rows == smaller->micro_batch)
    return partition(*smaller->serial, smaller->grads, smaller->tp, smaller->stages, stage, tp_rank, plan.pp);
  return make_error(errc::invalid_argument, "no program for micro-batches of " + std::to_string(rows) +
                                                " rows (the split of batch " + std::to_string(batch) + " has " +
                                                std::to_string(split().smallest()) + " to " +
                                                std::to_string(micro_batch) + ")");
}

result<compiled_model> compile(const model_fn& model, const planner::parallel_plan& plan, std::int64_t batch,
                               const std::vector<std::size_t>& stage_cuts, compile_options options) {
  if (auto st = planner::validate(plan, batch); !st) return st.error();
  if (plan.virtual_stages > 1 && options.sparse_tables)
    return make_error(errc::unsupported,
                      "plan: virtual stages (interleaved 1F1B) with sparse table gradients are not supported; "
                      "use virtual stages 1 or dense gradients (--model.sparse=false)");
  compiled_model cm;
  cm.source = model;
  cm.options = options;
  cm.plan = plan;
  cm.batch = batch;
  const planner::batch_split split = cm.split();
  if (auto st = build_shape(cm, model, split.largest(), plan, options); !st) return st.error();
  std::vector<std::size_t> cuts = stage_cuts;
  if (cuts.empty() && plan.stages() > 1) {  // the planner's cuts, with its default constants
    auto a = planner::analyze_model(model, 0);
    if (!a) return a.error();
    planner::search_options o;
    o.batch = batch;
    auto found = planner::stage_cuts(**a, plan, o);
    if (!found)
      return make_error(found.error().code, "plan pp=" + std::to_string(plan.pp) + ": " + found.error().message);
    cuts = std::move(*found);
  }
  if (auto st = cut_stages(cm, plan, cuts); !st) return st.error();
  cm.cuts = std::move(cuts);
  if (!split.even()) {  // the shares one row smaller: the same graph at their size
    auto small = std::make_unique<shaped_graph>();
    if (auto st = build_shape(*small, model, split.smallest(), plan, options); !st) return st.error();
    if (auto st = cut_stages(*small, plan, cm.cuts); !st) return st.error();
    cm.smaller = std::move(small);
  }
  cm.schedule = planner::build_schedule(plan.pp, plan.virtual_stages, plan.micro_batches,
                                        [&](int r) { return plan.buffer_size(r); });
  if (cm.schedule.empty())
    return make_error(errc::invalid_argument, "plan: the pipeline schedule stalls (pp " + std::to_string(plan.pp) +
                                                  ", virtual stages " + std::to_string(plan.virtual_stages) +
                                                  ", micro-batches " + std::to_string(plan.micro_batches) + ")");
  // Partition every (stage, tp rank) once now, so that a plan the model cannot take fails here.
  for (int s = 0; s < plan.pp; ++s)
    for (int t = 0; t < plan.tp; ++t) {
      auto prog = cm.program(s, t);
      if (!prog) return prog.error();
      if (!cm.smaller) continue;
      auto small = cm.program(s, t, cm.smaller->micro_batch);
      if (!small) return small.error();
      if (auto st = same_structure(*prog, *small); !st) return st.error();
    }
  return cm;
}

result<parameter_store> assemble_parameters(const compiled_model& cm, const std::vector<tensor>& pieces) {
  const auto& p = cm.plan;
  if (static_cast<int>(pieces.size()) != p.ranks())
    return make_error(errc::invalid_argument, "assemble: " + std::to_string(pieces.size()) + " pieces for " +
                                                  std::to_string(p.ranks()) + " ranks");
  const planner::rank_layout layout(p);
  parameter_store full;
  for (int s = 0; s < p.pp; ++s)
    for (int t = 0; t < p.tp; ++t) {
      auto prog = cm.program(s, t);
      if (!prog) return prog.error();
      std::vector<tensor> parts;
      for (int d = 0; d < (p.shard_params ? p.dp : 1); ++d)
        parts.push_back(pieces[static_cast<std::size_t>(layout.rank_of({d, s, t}))]);
      std::int64_t total = 0;
      for (const auto& q : parts) total += q.numel();
      // one piece: read in place (whole tensors below are views of it); ZeRO's: concatenated
      tensor flat = parts.size() == 1 && parts[0].is_contiguous() ? parts[0].reshape({total}) : tensor::empty({total});
      if (parts.size() > 1 || !parts[0].is_contiguous()) {
        std::int64_t at = 0;
        for (const auto& q : parts) {
          flat.slice(0, at, at + q.numel()).copy_from(q.contiguous().reshape({q.numel()}));
          at += q.numel();
        }
      }
      std::int64_t offset = 0;
      for (const auto& prm : prog->params) {
        const shape& local = prog->g.value(prm.local).type.shape;
        if (offset + local.numel() > total) return make_error(errc::invalid_argument, "assemble: pieces too short");
        tensor mine = flat.slice(0, offset, offset + local.numel()).reshape(local);
        offset += local.numel();
        const shape& whole = cm.serial->value(cm.serial->find(prm.name)).type.shape;
        if (const shard* sh = as_shard(prm.tp)) {
          auto [it, fresh] = full.try_emplace(prm.name, tensor::zeros(whole));
          range r = shard_part(*sh, whole[sh->dim], p.tp, t);
          it->second.slice(sh->dim, r.begin, r.end).copy_from(mine);
        } else if (mine.shape() == whole) {
          full.try_emplace(prm.name, mine);  // a view of the piece, no copy (the first tp rank's)
        } else {
          auto [it, fresh] = full.try_emplace(prm.name, tensor::zeros(whole));
          if (fresh) it->second.copy_from(mine);
        }
      }
    }
  return full;
}

}  // namespace cohort::actors
