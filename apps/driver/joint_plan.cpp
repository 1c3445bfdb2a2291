// The plan and a degree-dependent model chosen together: a variant per tensor-parallel
// degree, each planned with its degree fixed, the fastest predicted kept.
#include "apps/driver/joint_plan.hpp"

#include <algorithm>
#include <cstdio>

#include "planner/cluster.hpp"
#include "planner/search.hpp"

namespace cohort::apps {

bool plans_jointly(const training_job& job, const plan_options& p) {
  return static_cast<bool>(job.variants) && p.mode == planner::plan_mode::automatic && p.file.empty() &&
         p.cluster_file.empty();
}

result<joint_plan> plan_jointly(const training_job& job, const plan_options& p, int threads) {
  const int devices = p.ranks > 0 ? static_cast<int>(p.ranks) : std::max(1, planner::detect_cores());
  joint_plan out;
  plan_options request = p;
  std::string lines, reasons;
  double best = 0;
  bool found = false;
  for (int tp = 1; tp <= devices; ++tp) {
    // with --plan.ranks the plan uses every device; without it the planner also tries fewer
    // ranks, so a degree that does not divide the cores still has plans
    if ((p.ranks > 0 && devices % tp != 0) || (p.tp > 0 && p.tp != tp)) continue;
    json row = {{"tp", tp}};
    auto refuse = [&](const std::string& why) {
      row["error"] = why;
      reasons += "\n  tp" + std::to_string(tp) + ": " + why;
      out.candidates.push_back(row);
    };
    auto variant = job.variants(tp, devices / tp);
    if (!variant) {
      refuse(variant.error().message);
      continue;
    }
    training_job v = job;
    v.model = variant->model;
    request.tp = tp;
    auto setup = prepare_planning(v, request, threads);
    if (!setup) return setup.error();   // the profile, not the degree
    request.cluster_calibrate = false;  // measured once, saved: the next degrees read it
    auto choice = planner::choose_plan(*setup, request);
    if (!choice || !choice->predicted) {
      refuse(choice ? "no prediction" : choice.error().message);
      continue;
    }
    const double step = choice->predicted->step_s;
    row["plan"] = planner::describe(choice->plan);
    row["predicted_step_s"] = step;
    for (auto& [k, value] : variant->summary.items()) row[k] = value;
    out.candidates.push_back(row);
    char line[200];
    std::snprintf(line, sizeof line, "\n  tp%d: %s, predicted %.4g ms per step", tp,
                  planner::describe(choice->plan).c_str(), step * 1e3);
    lines += line;
    for (std::size_t at = 0; at < variant->note.size();) {  // the variant's lines, indented under it
      const std::size_t end = std::min(variant->note.find('\n', at), variant->note.size());
      lines += "\n    " + variant->note.substr(at, end - at);
      at = end + 1;
    }
    // the smaller degree on a near tie: fewer ranks to exchange the tables' outputs
    if (found && step >= best * (1 - planner::near_tie_fraction)) continue;
    found = true;
    best = step;
    out.job = v;  // its note stays the job's: the variant's lines are in the explanation already
    out.setup = std::make_shared<planner::planning_setup>(std::move(*setup));
    out.choice = std::move(*choice);
    out.model_summary = variant->summary;
  }
  if (!found)
    return make_error(errc::invalid_argument, "the planner found no plan for any tensor-parallel degree:" + reasons);
  for (auto& row : out.candidates)
    if (row.contains("plan") && row["tp"] == out.choice.plan.tp) row["chosen"] = true;
  out.explanation =
      "planner: the tables and the plan chosen together, one candidate per tensor-parallel degree:" + lines + reasons +
      "\n  chosen: tp" + std::to_string(out.choice.plan.tp);
  return out;
}

}  // namespace cohort::apps
