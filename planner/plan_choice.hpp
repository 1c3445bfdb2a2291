// How a run gets its plan: chosen by the planner (plan_mode::automatic, the default), given
// as degrees (manual), or loaded from a JSON file (--plan.file, the format --plan.only
// prints). Whatever the source, the plan is predicted by the cost model with the planner's
// own stage cuts, so a run executes exactly the plan whose prediction it reports and refits.
//
//   plan_request request;                                     // mode auto; request.dp = 2 fixes a degree
//   request.ranks = 4;                                        // plan for 4 ranks of this machine
//   auto profile = load_profile(default_profile_path());      // missing file: the defaults
//   if (!profile) return profile.error();
//   auto s = prepare_planning(tiny_mlp, /*optimizer_slots=*/2, /*batch=*/64, /*threads=*/2, request,
//                             *profile, default_profile_path());
//   if (!s) return s.error();
//   auto c = choose_plan(*s, request);                       // errors name what would fit
//   if (!c) return c.error();
//   std::cout << c->table;                                   // ranked candidates (auto)
//   nlohmann::json j = c->to_json();                         // {"dp":2,...,"cuts":[..],"predicted":{...}}
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/analysis.hpp"
#include "planner/cluster.hpp"
#include "planner/device_profile.hpp"
#include "planner/machine_profile.hpp"
#include "planner/search.hpp"

namespace cohort::planner {

enum class plan_mode { automatic, manual, serial };
/// "auto", "manual", "serial".
const char* to_string(plan_mode m);
result<plan_mode> parse_plan_mode(const std::string& text);

/// What the user asked of the planner (the --plan.* and --cluster.file options).
struct plan_request {
  plan_mode mode = plan_mode::automatic;
  // Degrees: 0 lets the planner choose (under auto they are constraints; manual: 0 means 1).
  std::int64_t dp = 0, tp = 0, pp = 0, micro_batches = 0;
  std::string schedule;  // gpipe, 1f1b; empty: the planner's choice (manual: 1f1b)
  bool shard_params = false;
  /// Chunks per pipeline rank (interleaved 1F1B): 0 lets auto choose (1, 2 or 4; manual: 1).
  std::int64_t virtual_stages = 0;
  std::vector<std::int64_t> cuts;  // explicit pipeline cuts (forward node indices)
  bool only = false;               // print the ranked plans and the chosen one, train nothing
  std::string file;                // a saved plan (JSON, as --plan.only prints it)
  std::int64_t ranks = 0;          // devices to plan for on this machine (0: its cores)
  std::int64_t processes = 1;      // the job's processes on this machine, each with its share of the threads
  std::string data_plane = "tcp";  // what links them (tcp, ucx): the profile's link between processes
  std::int64_t max_micro_batches = 64;
  std::string cluster_file;
  std::string device_profile;             // the cluster's devices' profile (overrides the one the cluster file names)
  bool half_precision = false;            // plan for mixed precision (cluster files)
  bool recompute = false;                 // may plan activation recomputation (cluster files)
  bool always_recompute = false;          // auto: only plans that recompute (what a published run did; cluster files)
  bool sparse_tables = false;             // embedding tables take sparse gradients: priced as their entries
  bool lookups_first = false;             // the heterogeneous pipeline: every table lookup in the first stage
  std::string assume_overlap;             // "", "none", "tp", "dp", "tp,dp": the runtime planned for overlaps these
  bool assume_sequence_parallel = false;  // the runtime planned for splits tp's repeated work by sequence
  bool assume_f32_gradients = false;      // the runtime planned for reduces gradients in f32
  bool assume_f32_loss = false;           // the runtime planned for computes the loss in f32 passes
  bool assume_even_layers = false;        // the runtime planned for gives every stage equally many layers
};

/// Everything the planner needs, gathered once per run.
struct planning_setup {
  std::unique_ptr<model_analysis> analysis;
  search_options search;
  std::optional<planner::cluster> cluster;  // from --cluster.file; absent: this machine
  /// A cluster file's planned devices: their efficiencies (search.eff comes from here, never
  /// from this machine's profile, which describes this machine's CPUs).
  device_profile devices_profile;
  machine_profile profile;
  std::string profile_path;
  int threads = 1;    // compute threads of the run (all its processes')
  int processes = 1;  // processes of the job when planned (plan_request::processes)
  std::string data_plane = "tcp";
  bool refit_refusal_reported = false;  // a refused refit is said once per run, not at every refit
};

/// This machine as the cost model sees `ranks` ranks on `threads` threads: each process of a
/// job computes on threads / processes of them, so `threads` also says how many processes
/// the ranks are spread over (after a join or a loss, not the number the job started with).
topology local_topology_of(const planning_setup& s, int ranks, int threads);

/// Analyzes the model and describes the devices: a cluster file (its devices' efficiencies
/// from opts.device_profile, else the profile the file names for them, else the uncalibrated
/// defaults), or `ranks` ranks of this machine under `profile` (read from, or measured and
/// saved to, `profile_path`).
result<planning_setup> prepare_planning(const std::function<var(graph&, std::int64_t)>& model, int optimizer_slots,
                                        std::int64_t batch, int threads, const plan_request& opts,
                                        machine_profile profile, std::string profile_path);

struct plan_choice {
  parallel_plan plan;
  std::vector<std::size_t> cuts;  // the stage cuts the run executes (empty only when pp = 1)
  std::string how;                // "auto", "manual", "file PATH"
  std::optional<planned> predicted;
  std::string table;                // the ranked candidates (auto only)
  std::vector<int> devices;         // rank -> device global id (cluster files), tp innermost
  std::vector<planned> candidates;  // every plan auto considered, best first (auto only)
  nlohmann::json to_json() const;
  /// A candidate in the same form (usable as a --plan.file).
  static nlohmann::json to_json(const planned& p, const std::string& how);
};

/// Picks the plan per opts.mode / opts.file. Errors: a plan file that is unreadable or
/// malformed (naming the field), a manual plan the model cannot take, nothing that fits
/// (with what would).
result<plan_choice> choose_plan(const planning_setup& setup, const plan_request& opts);

/// choose_plan for exactly `devices` ranks of this machine (a cluster file keeps its devices),
/// with the setup's cached model analysis: what the planner actor calls to re-plan a running
/// job for another device set. `threads` (0: the setup's): the compute threads those devices
/// have in all (a job that lost a process has fewer).
result<plan_choice> choose_plan_for(const planning_setup& setup, const plan_request& opts, int devices,
                                    int threads = 0);

/// Reads a plan file ({"dp":..,"tp":..,"pp":..,"virtual_stages":..,"micro_batches":..,
/// "schedule":..,"shard_params":..,"cuts":[..]}; missing keys default as on the command line).
result<plan_choice> load_plan_file(const std::string& path);

/// The same from JSON already parsed; `origin` prefixes the error messages.
result<plan_choice> plan_from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace cohort::planner
