// Closed-form refit of the efficiencies from measured task times.
#include "planner/refit.hpp"

#include <algorithm>
#include <cmath>

namespace cohort::planner {

refit_result refit(const std::vector<task_observation>& observations, const efficiency& current) {
  refit_result out;
  out.eff = current;
  double measured_fb = 0, predicted_fb = 0;
  for (const auto& o : observations) {
    measured_fb += o.measured_s[0] + o.measured_s[1];
    predicted_fb += o.predicted.forward_s + o.predicted.backward_s;
  }
  if (!(predicted_fb > 0) || !(measured_fb > 0) || !std::isfinite(measured_fb)) return out;
  const double a = measured_fb / predicted_fb;
  double measured_reduce = 0, predicted_reduce = 0;
  for (const auto& o : observations) {
    if (o.predicted.update_comm_s <= 0) continue;
    measured_reduce += o.measured_s[2];
    predicted_reduce += o.predicted.update_comm_s;
  }
  out.compute_factor = a;
  out.eff.gemm = current.gemm / a;
  out.eff.memory = current.memory / a;
  out.eff.per_op_seconds = current.per_op_seconds * a;
  if (predicted_reduce > 0 && measured_reduce > 0) {
    out.reduce_factor = measured_reduce / predicted_reduce;
    out.eff.link = current.link / out.reduce_factor;
  }
  out.changed = true;
  return out;
}

}  // namespace cohort::planner
