// The serial training loop.
#include "kernels/trainer.hpp"

#include <stdexcept>

#include "kernels/threads.hpp"

namespace cohort::kernels {

serial_trainer::serial_trainer(graph& g, trainer_options opts)
    : g_(&g), opts_(std::move(opts)), table_(opts_.reference_kernels ? reference_kernels() : cpu_kernels()) {}

result<std::unique_ptr<serial_trainer>> serial_trainer::create(graph& g, var loss, trainer_options opts) {
  if (opts.threads < 1)
    return make_error(errc::invalid_argument, "trainer: threads must be >= 1, got " + std::to_string(opts.threads));
  if (opts.sparse_tables)
    if (auto why = sparse_update_problem(opts.optimizer); !why.empty())
      return make_error(errc::invalid_argument, "trainer: sparse table updates need plain SGD: " + why);
  std::unique_ptr<serial_trainer> tr(new serial_trainer(g, opts));
  const bool fused = opts.sparse_tables && opts.fused_tables && !opts.reference_kernels;
  auto grads = autodiff(g, loss, {.sparse_tables = opts.sparse_tables, .fused_tables = fused});
  if (!grads) return grads.error();
  tr->grads_ = *grads;
  tr->params_ = init_parameters(g, opts.seed);
  set_math_threads(opts.threads);
  tr->pool_ = std::make_unique<thread_pool>(opts.threads);
  std::vector<value_id> keep{tr->grads_.loss};
  for (auto [p, gr] : tr->grads_.param_grads) keep.push_back(gr);
  for (const auto& s : tr->grads_.sparse_grads)
    for (value_id v : {s.rows, s.values, s.output_grad, s.ids})
      if (v != no_value) keep.push_back(v);
  auto ex = executor::create(g, tr->params_, keep, {&tr->table_, tr->pool_.get()});
  if (!ex) return ex.error();
  tr->exec_ = std::make_unique<executor>(std::move(*ex));
  for (auto [p, gr] : tr->grads_.param_grads) {
    tensor& t = tr->params_.at(g.value(p).name);
    tr->param_tensors_.push_back(&t);
    tr->opt_state_.push_back(make_state(t, opts.optimizer));
  }
  for (const auto& s : tr->grads_.sparse_grads) {
    tensor& t = tr->params_.at(g.value(s.param).name);
    const std::int64_t entries = g.value(s.rows != no_value ? s.rows : s.ids).type.shape.numel();
    tr->sparse_.push_back({&t, s.rows, s.values, s.output_grad, s.ids, s.mean, row_sums(entries, t.shape()[1]),
                           make_state(t, opts.optimizer)});
  }
  tr->exec_->input(tr->grads_.seed).fill(1.f);
  return tr;
}

tensor& serial_trainer::input(const std::string& name) {
  value_id id = g_->find(name);
  if (id == no_value || g_->value(id).kind != value_kind::input)
    throw std::invalid_argument("trainer: no input called '" + name + "'");
  return exec_->input(id);
}

result<float> serial_trainer::step() {
  if (auto st = exec_->run(); !st) return st.error();
  float loss = exec_->value(grads_.loss).data<float>()[0];
  for (std::size_t i = 0; i < param_tensors_.size(); ++i)
    apply_update(*param_tensors_[i], exec_->value(grads_.param_grads[i].second), opt_state_[i], opts_.optimizer);
  for (auto& s : sparse_) {
    if (s.rows != no_value) {
      const tensor& rows = exec_->value(s.rows);
      s.sums.gather(rows.data<std::int32_t>(), exec_->value(s.values).data<float>(), rows.numel());
    } else {
      const tensor& ids = exec_->value(s.ids);
      const std::int64_t length = ids.shape().at(-1);
      s.sums.clear();
      s.sums.add_bags(ids.data<std::int32_t>(), length > 0 ? ids.numel() / length : 0, length,
                      exec_->value(s.output_grad).data<float>(), s.mean);
    }
    apply_sparse_update(*s.table, s.sums, s.state, opts_.optimizer);
  }
  ++steps_;
  return loss;
}

}  // namespace cohort::kernels
