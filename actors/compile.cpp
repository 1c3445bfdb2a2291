// Plan compilation.
#include "actors/compile.hpp"

#include "planner/analysis.hpp"
#include "planner/rank_layout.hpp"
#include "planner/search.hpp"

namespace cohort::actors {

result<stage_program> compiled_model::program(int stage, int tp_rank) const {
  return partition(*serial, grads, tp, stages, stage, tp_rank);
}

result<compiled_model> compile(const model_fn& model, const planner::parallel_plan& plan, std::int64_t batch,
                               const std::vector<std::size_t>& stage_cuts, compile_options options) {
  if (auto st = planner::validate(plan, batch); !st) return st.error();
  compiled_model cm;
  cm.source = model;
  cm.options = options;
  cm.plan = plan;
  cm.batch = batch;
  cm.micro_batch = batch / (static_cast<std::int64_t>(plan.dp) * plan.micro_batches);
  cm.serial = std::make_unique<graph>();
  var loss = model(*cm.serial, cm.micro_batch);
  if (auto st = cm.serial->check(); !st) return st.error();
  auto gr = autodiff(*cm.serial, loss, {.sparse_tables = options.sparse_tables});
  if (!gr) return gr.error();
  cm.grads = *gr;
  auto tp = complete_axis(*cm.serial, "tp", plan.tp);
  if (!tp) return make_error(tp.error().code, "plan tp=" + std::to_string(plan.tp) + ": " + tp.error().message);
  cm.tp = std::move(*tp);
  std::vector<std::size_t> cuts = stage_cuts;
  if (cuts.empty() && plan.pp > 1) {  // the planner's cuts, with its default constants
    auto a = planner::analyze_model(model, 0);
    if (!a) return a.error();
    planner::search_options o;
    o.batch = batch;
    auto found = planner::stage_cuts(**a, plan, o);
    if (!found)
      return make_error(found.error().code, "plan pp=" + std::to_string(plan.pp) + ": " + found.error().message);
    cuts = std::move(*found);
  }
  auto st = stages_from_cuts(*cm.serial, cm.grads, cuts);
  if (!st) return make_error(st.error().code, "plan pp=" + std::to_string(plan.pp) + ": " + st.error().message);
  if (st->stages != plan.pp)
    return make_error(errc::invalid_argument,
                      "plan pp=" + std::to_string(plan.pp) + " but " + std::to_string(st->stages) + " stages were cut");
  cm.stages = std::move(*st);
  cm.cuts = std::move(cuts);
  cm.schedule = planner::build_schedule(plan.pp, plan.micro_batches, [&](int s) { return plan.buffer_size(s); });
  // Partition every (stage, tp rank) once now, so that a plan the model cannot take fails here.
  for (int s = 0; s < plan.pp; ++s)
    for (int t = 0; t < plan.tp; ++t)
      if (auto prog = cm.program(s, t); !prog) return prog.error();
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
          range r = shard_range(whole[sh->dim], p.tp, t, sh->granule);
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
