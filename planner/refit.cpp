// Closed-form refit of the efficiencies from measured task times, and the non-negative
// least squares the runtime's overhead terms are calibrated with.
#include "planner/refit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cohort::planner {
namespace {

// Least squares for y = A x over the columns in `use` (the others 0); the residual's sum of squares.
double solve(const std::vector<std::array<double, 3>>& a, const std::vector<double>& y, std::array<bool, 3> use,
             std::array<double, 3>& x) {
  // normal equations, eliminated in place (3 x 3 at most)
  std::array<std::array<double, 4>, 3> m{};
  for (std::size_t i = 0; i < y.size(); ++i)
    for (int r = 0; r < 3; ++r) {
      if (!use[r]) continue;
      for (int c = 0; c < 3; ++c)
        if (use[c]) m[r][c] += a[i][r] * a[i][c];
      m[r][3] += a[i][r] * y[i];
    }
  for (int r = 0; r < 3; ++r)
    if (!use[r]) m[r][r] = 1, m[r][3] = 0;
  for (int k = 0; k < 3; ++k) {
    int pivot = k;
    for (int r = k + 1; r < 3; ++r)
      if (std::abs(m[r][k]) > std::abs(m[pivot][k])) pivot = r;
    std::swap(m[k], m[pivot]);
    if (std::abs(m[k][k]) < 1e-30) return std::numeric_limits<double>::infinity();
    for (int r = 0; r < 3; ++r) {
      if (r == k) continue;
      const double f = m[r][k] / m[k][k];
      for (int c = k; c < 4; ++c) m[r][c] -= f * m[k][c];
    }
  }
  for (int k = 0; k < 3; ++k) x[k] = m[k][3] / m[k][k];
  double sse = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double e = y[i] - (a[i][0] * x[0] + a[i][1] * x[1] + a[i][2] * x[2]);
    sse += e * e;
  }
  return sse;
}

}  // namespace

refit_result refit(const std::vector<task_observation>& observations, const efficiency& current) {
  refit_result out;
  out.eff = current;
  double measured_fb = 0, predicted_fb = 0;
  for (const auto& o : observations) {
    measured_fb += o.measured.forward_s + o.measured.backward_s;
    predicted_fb += o.predicted.forward_s + o.predicted.backward_s;
  }
  if (!(predicted_fb > 0) || !(measured_fb > 0) || !std::isfinite(measured_fb)) return out;
  const double a = measured_fb / predicted_fb;
  double measured_reduce = 0, predicted_reduce = 0;
  for (const auto& o : observations) {
    if (o.predicted.update_comm_s <= 0) continue;
    measured_reduce += o.measured.update_s;
    predicted_reduce += o.predicted.update_comm_s;
  }
  out.compute_factor = a;
  out.eff.gemm = current.gemm / a;
  out.eff.memory = current.memory / a;
  for (auto& point : out.eff.gemm_by_flops) point[1] /= a;
  out.eff.per_op_seconds = current.per_op_seconds * a;
  if (predicted_reduce > 0 && measured_reduce > 0) {
    out.reduce_factor = measured_reduce / predicted_reduce;
    out.eff.link = current.link / out.reduce_factor;
  }
  out.changed = true;
  return out;
}

efficiency blend(const efficiency& old, const efficiency& fit, double weight) {
  const double w = std::clamp(weight, 0.0, 1.0);
  auto geometric = [w](double a, double b) { return a > 0 && b > 0 ? std::pow(a, 1 - w) * std::pow(b, w) : b; };
  auto arithmetic = [w](double a, double b) { return (1 - w) * a + w * b; };
  efficiency e = fit;
  e.gemm = geometric(old.gemm, fit.gemm);
  e.memory = geometric(old.memory, fit.memory);
  e.link = geometric(old.link, fit.link);
  if (old.gemm_by_flops.size() == fit.gemm_by_flops.size())
    for (std::size_t i = 0; i < e.gemm_by_flops.size(); ++i)
      e.gemm_by_flops[i][1] = geometric(old.gemm_by_flops[i][1], fit.gemm_by_flops[i][1]);
  e.per_op_seconds = arithmetic(old.per_op_seconds, fit.per_op_seconds);
  e.per_task_seconds = arithmetic(old.per_task_seconds, fit.per_task_seconds);
  e.per_step_seconds = arithmetic(old.per_step_seconds, fit.per_step_seconds);
  e.per_rank_seconds = arithmetic(old.per_rank_seconds, fit.per_rank_seconds);
  return e;
}

double refit_weight(int n) { return 1.0 / static_cast<double>(std::clamp(n, 1, max_refits_averaged)); }

std::array<double, 3> fit_nonnegative(const std::vector<std::array<double, 3>>& a, const std::vector<double>& y) {
  std::array<double, 3> best{0, 0, 0};
  double best_sse = 0;
  for (double v : y) best_sse += v * v;  // all terms 0
  for (int mask = 1; mask < 8; ++mask) {
    std::array<bool, 3> use{(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    std::array<double, 3> x{0, 0, 0};
    double sse = solve(a, y, use, x);
    if (x[0] < 0 || x[1] < 0 || x[2] < 0 || !(sse < best_sse)) continue;
    best_sse = sse;
    best = x;
  }
  return best;
}

}  // namespace cohort::planner
