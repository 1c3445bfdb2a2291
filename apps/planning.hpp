// How an app gets its plan: chosen by the planner (--plan.mode=auto, the default), given on
// the command line (manual), or loaded from a JSON file (--plan.file, the format
// --plan.only prints). Whatever the source, the plan is predicted by the cost model, so the
// run can report predicted against measured step time and refit the model.
//
//   planning_setup s = ...;                                  // the model, the batch, the devices
//   auto c = choose_plan(s, plan_opts);                      // errors name what would fit
//   std::cout << c->table;                                   // ranked candidates (auto)
//   json j = c->to_json();                                   // {"dp":2,...,"predicted":{...}}
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/machine_profile.hpp"
#include "planner/analysis.hpp"
#include "planner/cluster.hpp"
#include "planner/search.hpp"

namespace cohort::apps {

struct plan_options;

/// Everything the planner needs, gathered once per run.
struct planning_setup {
  std::unique_ptr<planner::model_analysis> analysis;
  planner::search_options search;
  std::optional<planner::cluster> cluster;  // from --cluster.file; absent: this machine
  machine_profile profile;
  std::string profile_path;
  int threads = 1;                          // compute threads of the run
};

/// Analyzes the model and describes the devices: a cluster file, or `ranks` ranks of this
/// machine under the profile (loaded from opts, or measured when --cluster.calibrate).
result<planning_setup> prepare_planning(const std::function<var(graph&, std::int64_t)>& model, int optimizer_slots,
                                        std::int64_t batch, int threads, const plan_options& opts);

struct plan_choice {
  planner::parallel_plan plan;
  std::vector<std::size_t> cuts;  // empty: balanced by the runtime
  std::string how;                // "auto", "manual", "file PATH"
  std::optional<planner::planned> predicted;
  std::string table;              // the ranked candidates (auto only)
  std::vector<int> devices;       // rank -> device global id (cluster files), tp innermost
  std::vector<planner::planned> candidates;  // every plan auto considered, best first (auto only)
  nlohmann::json to_json() const;
  /// A candidate in the same form (usable as a --plan.file).
  static nlohmann::json to_json(const planner::planned& p, const std::string& how);
};

/// Picks the plan per opts.mode / opts.file. Errors: a plan file that is unreadable or
/// malformed (naming the field), a manual plan the model cannot take, nothing that fits
/// (with what would).
result<plan_choice> choose_plan(const planning_setup& setup, const plan_options& opts);

/// Reads a plan file ({"dp":..,"tp":..,"pp":..,"micro_batches":..,"schedule":..,
/// "shard_params":..,"cuts":[..]}; missing keys default as on the command line).
result<plan_choice> load_plan_file(const std::string& path);

/// The same from JSON already parsed; `origin` prefixes the error messages.
result<plan_choice> plan_from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace cohort::apps
