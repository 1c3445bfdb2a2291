// Plan selection: auto, manual or from a file, always with a prediction and the planner's cuts.
#include "planner/plan_choice.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

namespace cohort::planner {
namespace {

using json = nlohmann::json;

// The constraints an auto plan must satisfy: degrees the user fixed (0: free).
bool matches(const parallel_plan& p, const plan_request& o) {
  if (o.dp > 0 && p.dp != o.dp) return false;
  if (o.tp > 0 && p.tp != o.tp) return false;
  if (o.pp > 0 && p.pp != o.pp) return false;
  if (o.micro_batches > 0 && p.micro_batches != o.micro_batches) return false;
  if (o.virtual_stages > 0 && p.virtual_stages != o.virtual_stages) return false;
  if (!o.schedule.empty() && p.pp > 1 && to_string(p.schedule) != o.schedule) return false;
  if (o.shard_params && !p.shard_params) return false;
  return true;
}

std::string constraints_text(const plan_request& o) {
  std::string out;
  auto add = [&](const char* k, std::int64_t v) {
    if (v > 0) out += std::string(out.empty() ? "" : " ") + k + "=" + std::to_string(v);
  };
  add("dp", o.dp), add("tp", o.tp), add("pp", o.pp), add("micro-batches", o.micro_batches);
  add("virtual-stages", o.virtual_stages);
  if (!o.schedule.empty()) out += std::string(out.empty() ? "" : " ") + "schedule=" + o.schedule;
  if (o.shard_params) out += std::string(out.empty() ? "" : " ") + "shard-params";
  return out;
}

// The profile of the devices topology_of plans for (accelerators when there are any): the
// one given, else the one the cluster file names for the first of them (relative to the file).
result<device_profile> profile_for_devices(const cluster& c, const plan_request& o) {
  if (!o.device_profile.empty()) return load_device_profile(o.device_profile);
  const device_kind planned = c.planned_kind();
  for (const device& d : c.devices()) {
    if (d.kind != planned) continue;
    if (d.profile.empty()) return default_device_profile(d.model);
    std::filesystem::path path(d.profile);
    if (path.is_relative()) path = std::filesystem::path(o.cluster_file).parent_path() / path;
    auto p = load_device_profile(path.lexically_normal().string());
    if (!p)
      return make_error(p.error().code, o.cluster_file + ": the profile of " + d.model + ": " + p.error().message);
    return p;
  }
  return default_device_profile("");
}

// Why --plan.assume-even-layers may leave no plan: what the error adds.
std::string even_layers_note(const search_options& o, const model_analysis& a) {
  if (!o.even_layers) return "";
  if (a.layer_starts.empty())
    return " (and --plan.assume-even-layers needs repeated layers: the model has no consecutive top-level scopes "
           "alike)";
  return " (and with --plan.assume-even-layers, pp x virtual stages must divide the model's " +
         std::to_string(a.layer_starts.size()) + " layers)";
}

}  // namespace

const char* to_string(plan_mode m) {
  switch (m) {
    case plan_mode::automatic:
      return "auto";
    case plan_mode::manual:
      return "manual";
    case plan_mode::serial:
      return "serial";
  }
  return "?";
}

result<plan_mode> parse_plan_mode(const std::string& text) {
  for (plan_mode m : {plan_mode::automatic, plan_mode::manual, plan_mode::serial})
    if (text == to_string(m)) return m;
  return make_error(errc::invalid_argument, "--plan.mode must be auto, manual or serial, got '" + text + "'");
}

result<planning_setup> prepare_planning(const std::function<var(graph&, std::int64_t)>& model, int optimizer_slots,
                                        std::int64_t batch, int threads, const plan_request& opts,
                                        machine_profile profile, std::string profile_path) {
  planning_setup s;
  s.threads = threads;
  auto a = analyze_model(model, optimizer_slots, opts.sparse_tables);
  if (!a) return a.error();
  s.analysis = std::move(*a);
  s.profile = std::move(profile);
  s.profile_path = std::move(profile_path);
  s.search.batch = batch;
  s.search.lookups_first = opts.lookups_first;
  s.search.eff = s.profile.eff;
  s.search.max_micro_batches = static_cast<int>(opts.max_micro_batches);
  if (opts.virtual_stages > 0) s.search.virtual_stages = {static_cast<int>(opts.virtual_stages)};
  // the runtime does not interleave sparse tables' entries: never a plan it refuses
  if (opts.sparse_tables && opts.virtual_stages <= 0) s.search.virtual_stages = {1};
  if (!opts.cluster_file.empty()) {
    auto c = load_cluster_file(opts.cluster_file);
    if (!c) return c.error();
    auto t = topology_of(*c, opts.half_precision);
    if (!t) return t.error();
    s.search.topo = *t;
    auto d = profile_for_devices(*c, opts);
    if (!d) return d.error();
    s.devices_profile = std::move(*d);
    s.search.eff = s.devices_profile.eff;
    s.search.half_precision = opts.half_precision;
    s.search.allow_recompute = opts.recompute || opts.always_recompute;
    for (std::size_t at = 0; at < opts.assume_overlap.size();) {
      const std::size_t comma = std::min(opts.assume_overlap.find(',', at), opts.assume_overlap.size());
      const std::string item = opts.assume_overlap.substr(at, comma - at);
      if (item == "tp")
        s.search.overlap_tp_comm = true;
      else if (item == "dp")
        s.search.overlap_dp_reduction = true;
      else if (item != "none")
        return make_error(errc::invalid_argument,
                          "--plan.assume-overlap: expected none, tp, dp or tp,dp, got '" + opts.assume_overlap + "'");
      at = comma + 1;
    }
    s.search.sequence_parallel = opts.assume_sequence_parallel;
    s.search.f32_gradients = opts.assume_f32_gradients;
    s.search.f32_loss = opts.assume_f32_loss;
    s.search.even_layers = opts.assume_even_layers;
    // Megatron interleaves any number of chunks that divides a rank's layers
    if (opts.assume_even_layers && opts.virtual_stages <= 0 && !opts.sparse_tables)
      s.search.virtual_stages = {1, 2, 3, 4, 5, 6, 7, 8};
    s.cluster = std::move(*c);
  } else {
    int ranks = opts.ranks > 0 ? static_cast<int>(opts.ranks) : detect_cores();
    if (opts.mode == plan_mode::manual || !opts.file.empty()) ranks = 0;  // set from the plan in choose_plan
    s.processes = static_cast<int>(std::clamp<std::int64_t>(opts.processes, 1, 1 << 16));
    s.data_plane = opts.data_plane;
    s.search.topo = local_topology_of(s, std::max(1, ranks), threads);
    // the runtime runs tensor-parallel groups across the processes of one machine too
    if (s.processes > 1) s.search.tp_across_machines = true;
  }
  return s;
}

topology local_topology_of(const planning_setup& s, int ranks, int threads) {
  int processes = 1;
  if (s.processes > 1) {
    const int per_process = std::max(1, s.threads / s.processes);
    processes = std::max(1, threads / per_process);
  }
  return local_topology(s.profile, ranks, threads, processes, s.data_plane);
}

json plan_choice::to_json(const planned& p, const std::string& how) {
  plan_choice c;
  c.plan = p.plan;
  c.cuts = p.cuts;
  c.how = how;
  c.predicted = p;
  return c.to_json();
}

json plan_choice::to_json() const {
  json j = {{"mode", how},
            {"dp", plan.dp},
            {"tp", plan.tp},
            {"pp", plan.pp},
            {"virtual_stages", plan.virtual_stages},
            {"micro_batches", plan.micro_batches},
            {"schedule", to_string(plan.schedule)},
            {"shard_params", plan.shard_params},
            {"ranks", plan.ranks()},
            {"cuts", cuts}};
  if (!devices.empty()) j["devices"] = devices;
  if (predicted && predicted->recompute) j["recompute"] = true;
  if (predicted && predicted->embedding_on_host) j["embedding_on_host"] = true;
  if (predicted) {
    j["predicted"] = {{"step_s", predicted->step_s},
                      {"peak_memory_bytes", predicted->peak_memory_bytes},
                      {"bubble", predicted->bubble},
                      {"comm_fraction", predicted->step_s > 0 ? predicted->comm_s / predicted->step_s : 0.0},
                      {"fits", predicted->fits}};
    // per stage, the task times as the runtime measures them (what --plan.refit compares)
    json stages = json::array();
    for (const auto& st : predicted->stages)
      stages.push_back({{"forward_s", st.forward_s},
                        {"backward_s", st.backward_s},
                        {"update_s", st.update_s},
                        {"reduce_s", st.update_comm_s}});
    j["predicted"]["stages"] = stages;
  }
  return j;
}

result<plan_choice> load_plan_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::not_found, "cannot read the plan file " + path);
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(errc::invalid_argument, path + ": not a JSON object");
  auto c = plan_from_json(j, path);
  if (c) c->how = "file " + path;
  return c;
}

result<plan_choice> plan_from_json(const json& j, const std::string& path) {
  if (!j.is_object()) return make_error(errc::invalid_argument, path + ": not a JSON object");
  plan_choice c;
  c.how = path;
  static const std::set<std::string> known{"mode",
                                           "dp",
                                           "tp",
                                           "pp",
                                           "virtual_stages",
                                           "micro_batches",
                                           "schedule",
                                           "shard_params",
                                           "ranks",
                                           "cuts",
                                           "devices",
                                           "predicted",
                                           "recompute",
                                           "embedding_on_host",
                                           "parameters",
                                           "planning_s",
                                           "replan_s",
                                           "device_profile"};  // the last four: information
  for (auto& [k, v] : j.items())
    if (!known.count(k)) return make_error(errc::invalid_argument, path + ": unknown key '" + k + "'");
  auto degree = [&](const char* key, int& target) -> status {
    if (!j.contains(key)) return {};
    if (!j[key].is_number_integer() || j[key].get<long long>() < 1 || j[key].get<long long>() > 1 << 20)
      return make_error(errc::invalid_argument, path + ": " + key + ": expected a positive integer");
    target = j[key].get<int>();
    return {};
  };
  for (auto [key, target] : {std::pair<const char*, int*>{"dp", &c.plan.dp},
                             {"tp", &c.plan.tp},
                             {"pp", &c.plan.pp},
                             {"virtual_stages", &c.plan.virtual_stages},
                             {"micro_batches", &c.plan.micro_batches}})
    if (auto st = degree(key, *target); !st) return st.error();
  if (j.contains("recompute") && j["recompute"] != false)
    return make_error(errc::invalid_argument, path + ": recompute: the runtime does not recompute activations yet");
  if (j.contains("embedding_on_host") && j["embedding_on_host"] != false)
    return make_error(errc::invalid_argument,
                      path + ": embedding_on_host: the runtime does not place layers on host CPUs yet");
  if (j.contains("schedule")) {
    if (!j["schedule"].is_string())
      return make_error(errc::invalid_argument, path + ": schedule: expected \"gpipe\" or \"1f1b\"");
    auto s = parse_schedule(j["schedule"].get<std::string>());
    if (!s) return make_error(errc::invalid_argument, path + ": schedule: " + s.error().message);
    c.plan.schedule = *s;
  }
  if (j.contains("shard_params")) {
    if (!j["shard_params"].is_boolean())
      return make_error(errc::invalid_argument, path + ": shard_params: expected true or false");
    c.plan.shard_params = j["shard_params"].get<bool>();
  }
  if (j.contains("cuts")) {
    if (!j["cuts"].is_array())
      return make_error(errc::invalid_argument, path + ": cuts: expected an array of node indices");
    for (std::size_t i = 0; i < j["cuts"].size(); ++i) {
      const json& v = j["cuts"][i];
      if (!v.is_number_integer() || v.get<long long>() < 1)
        return make_error(errc::invalid_argument,
                          path + ": cuts[" + std::to_string(i) + "]: expected a positive integer");
      c.cuts.push_back(v.get<std::size_t>());
    }
    if (!c.cuts.empty() && c.cuts.size() + 1 != static_cast<std::size_t>(c.plan.stages()))
      return make_error(errc::invalid_argument,
                        path + ": cuts: " + std::to_string(c.cuts.size()) +
                            " cuts for pp=" + std::to_string(c.plan.pp) +
                            (c.plan.virtual_stages > 1
                                 ? " x virtual_stages=" + std::to_string(c.plan.virtual_stages) + " (needs pp x v - 1)"
                                 : std::string(" (needs pp - 1)")));
  }
  return c;
}

namespace {

// `threads`: the compute threads the plan's ranks have in all (this machine's topology).
result<plan_choice> choose(const planning_setup& s, const plan_request& o, search_options search, int threads) {
  plan_choice c;
  if (!o.file.empty()) {
    auto f = load_plan_file(o.file);
    if (!f) return f.error();
    c = std::move(*f);
  } else if (o.mode == plan_mode::manual) {
    c.how = "manual";
    auto sched = parse_schedule(o.schedule.empty() ? "1f1b" : o.schedule);
    if (!sched) return sched.error();
    c.plan = {.dp = static_cast<int>(std::max<std::int64_t>(1, o.dp)),
              .tp = static_cast<int>(std::max<std::int64_t>(1, o.tp)),
              .pp = static_cast<int>(std::max<std::int64_t>(1, o.pp)),
              .micro_batches = static_cast<int>(std::max<std::int64_t>(1, o.micro_batches)),
              .schedule = *sched,
              .shard_params = o.shard_params,
              .virtual_stages = static_cast<int>(std::max<std::int64_t>(1, o.virtual_stages))};
    for (auto cut : o.cuts) c.cuts.push_back(static_cast<std::size_t>(cut));
  } else {
    c.how = "auto";
    // On this machine without --plan.ranks, fewer ranks with more threads each are
    // candidates too (one rank on every core can beat two ranks that must communicate).
    const int most = search.topo.devices;
    const int fewest = !s.cluster && o.ranks == 0 ? 1 : most;
    std::vector<planned> allowed;
    for (int ranks = fewest; ranks <= most; ++ranks) {
      search_options here = search;
      if (!s.cluster) here.topo = local_topology_of(s, ranks, threads);
      auto ranked = rank_plans(*s.analysis, here);
      if (!ranked) return ranked.error();
      for (auto& p : *ranked)
        if (matches(p.plan, o) && (p.recompute || !o.always_recompute)) allowed.push_back(std::move(p));
    }
    std::stable_sort(allowed.begin(), allowed.end(), [](const planned& x, const planned& y) {
      if (x.fits != y.fits) return x.fits;
      return x.fits ? x.step_s < y.step_s : x.peak_memory_bytes < y.peak_memory_bytes;
    });
    const std::size_t fastest = prefer_simpler_near_ties(allowed);
    c.table = explain(allowed, o.only ? 40 : 10);
    if (fastest > 0) {
      char note[200];
      std::snprintf(
          note, sizeof note,
          "  #1 is chosen over #%zu, predicted %.2f %% faster: within %.0f %% the planner takes the plan with "
          "fewer synchronisations\n",
          fastest + 1, 100 * (allowed[0].step_s / allowed[fastest].step_s - 1), 100 * near_tie_fraction);
      c.table += note;
    }
    if (allowed.empty())
      return make_error(
          errc::invalid_argument,
          "no plan for " + std::to_string(search.topo.devices) + " devices and batch " + std::to_string(search.batch) +
              (constraints_text(o).empty() ? "" : " with " + constraints_text(o)) +
              "; every degree must divide the devices, and the batch needs a row for each of dp x micro-batches" +
              even_layers_note(search, *s.analysis));
    if (!allowed.front().fits) {
      std::string advice = what_would_fit(*s.analysis, search);
      return make_error(errc::invalid_argument, "no plan fits in memory (" + allowed.front().rejected + ")\n" + advice);
    }
    c.plan = allowed.front().plan;
    c.cuts = allowed.front().cuts;
    c.predicted = allowed.front();
    c.candidates = std::move(allowed);
  }
  if (!c.predicted) {
    // this machine: the topology of exactly the plan's ranks; a cluster file keeps its devices
    if (!s.cluster) search.topo = local_topology_of(s, c.plan.ranks(), threads);
    if (search.lookups_first)  // a given cut the heterogeneous pipeline cannot take: no run
      if (auto st = lookups_in_first_stage(*s.analysis, c.cuts); !st)
        return make_error(st.error().code, "--plan.cuts: " + st.error().message);
    auto p = evaluate_plan(*s.analysis, c.plan, search, c.cuts);
    if (p) {
      c.predicted = *p;
      c.cuts = p->cuts;  // the planner's cuts are the ones the run executes
    } else if (c.plan.stages() > 1 && c.cuts.empty()) {
      return make_error(p.error().code,
                        "plan pp=" + std::to_string(c.plan.pp) + ": " + p.error().message);  // no cuts, no run
    }  // else a plan the model cannot take fails when compiled, with the runtime's own message
  }
  if (s.cluster) {
    // ranks in order: tp innermost, then stages, then replicas, on devices in file order
    // (the kind topology_of planned for: accelerators when there are any)
    std::vector<device> devices;
    const device_kind planned = s.cluster->planned_kind();
    for (const auto& d : s.cluster->devices())
      if (d.kind == planned) devices.push_back(d);
    if (c.plan.ranks() > static_cast<int>(devices.size()))
      return make_error(errc::invalid_argument, "the plan needs " + std::to_string(c.plan.ranks()) + " devices; " +
                                                    o.cluster_file + " has " + std::to_string(devices.size()));
    for (int r = 0; r < c.plan.ranks(); ++r) c.devices.push_back(devices[static_cast<std::size_t>(r)].global_id);
  }
  return c;
}

}  // namespace

result<plan_choice> choose_plan(const planning_setup& s, const plan_request& o) {
  return choose(s, o, s.search, s.threads);
}

result<plan_choice> choose_plan_for(const planning_setup& s, const plan_request& o, int devices, int threads) {
  search_options search = s.search;
  const int all = threads > 0 ? threads : s.threads;
  if (!s.cluster) search.topo = local_topology_of(s, std::max(1, devices), all);
  plan_request exact = o;
  exact.ranks = std::max(1, devices);  // these devices, not 1 to their number
  return choose(s, exact, search, all);
}

}  // namespace cohort::planner
