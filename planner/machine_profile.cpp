// The machine profile: defaults, the JSON file, the rates solved from GEMM timings, and the
// topology of ranks on this machine. The micro-benchmarks that measure it are
// actors/calibration.cpp (they run kernels, the transport and the runtime).
#include "planner/machine_profile.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace cohort::planner {
namespace {

using json = nlohmann::json;

template <class T>
result<T> field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return make_error(errc::invalid_argument, where + "." + key + ": missing");
  const json& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return make_error(errc::invalid_argument, where + "." + key + ": expected a string");
    return v.get<std::string>();
  } else {
    if (!v.is_number() || v.get<double>() < 0)
      return make_error(errc::invalid_argument, where + "." + key + ": expected a non-negative number");
    return v.get<T>();
  }
}

}  // namespace

gemm_rates solve_gemm_rates(const gemm_timing& square, const gemm_timing& skinny) {
  // t = flops / F + bytes / B for both shapes: two equations in 1/F and 1/B
  const double det = square.flops * skinny.bytes - skinny.flops * square.bytes;
  gemm_rates r{square.flops / square.seconds, 0.0};
  if (det == 0) return r;
  const double per_flop = (square.seconds * skinny.bytes - skinny.seconds * square.bytes) / det;
  const double per_byte = (square.flops * skinny.seconds - skinny.flops * square.seconds) / det;
  if (!(per_flop > 0) || !(per_byte > 0)) return r;  // noise: the square GEMM's whole rate, no traffic term
  return {1.0 / per_flop, 1.0 / per_byte};
}

std::string default_profile_path() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/cohort/profile.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/cohort/profile.json";
  return "cohort-profile.json";
}

result<machine_profile> load_profile(const std::string& path) {
  machine_profile p;
  p.cores = detect_cores();
  std::ifstream in(path);
  if (!in) return p;
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(errc::invalid_argument, path + ": not a JSON object");
  if (!j.contains("cohort_profile"))
    return make_error(errc::invalid_argument, path + ": not a cohort profile (no \"cohort_profile\")");
#define COHORT_READ(target, obj, key, where)                         \
  {                                                                  \
    auto v = field<std::decay_t<decltype(target)>>(obj, key, where); \
    if (!v) return v.error();                                        \
    target = *v;                                                     \
  }
  const std::string w = path + ": profile";
  COHORT_READ(p.cores, j, "cores", w);
  COHORT_READ(p.flops_f32_per_core, j, "flops_f32_per_core", w);
  COHORT_READ(p.memory_bandwidth_bytes_per_s, j, "memory_bandwidth_bytes_per_s", w);
  COHORT_READ(p.refits, j, "refits", w);
  // added after the first profiles were written: optional, the defaults stand in
  if (j.contains("cache_bytes")) COHORT_READ(p.cache_bytes, j, "cache_bytes", w);
  if (j.contains("cache_bandwidth_bytes_per_s"))
    COHORT_READ(p.cache_bandwidth_bytes_per_s, j, "cache_bandwidth_bytes_per_s", w);
  if (j.contains("optimizer_bytes_per_s")) COHORT_READ(p.optimizer_bytes_per_s, j, "optimizer_bytes_per_s", w);
  if (j.contains("gemm_bytes_per_s")) COHORT_READ(p.gemm_bytes_per_s, j, "gemm_bytes_per_s", w);
  if (j.contains("lookup_bytes_per_s")) COHORT_READ(p.lookup_bytes_per_s, j, "lookup_bytes_per_s", w);
  if (j.contains("sparse_update_bytes_per_s"))
    COHORT_READ(p.sparse_update_bytes_per_s, j, "sparse_update_bytes_per_s", w);
  if (j.contains("table_rates")) {  // added 2026-12-07: optional
    if (!j["table_rates"].is_array())
      return make_error(errc::invalid_argument, w + ".table_rates: must be an array of measured sizes");
    for (std::size_t i = 0; i < j["table_rates"].size(); ++i) {
      const std::string where = w + ".table_rates[" + std::to_string(i) + "]";
      const json& e = j["table_rates"][i];
      if (!e.is_object()) return make_error(errc::invalid_argument, where + ": must be an object");
      table_rate t;
      COHORT_READ(t.table_bytes, e, "table_bytes", where);
      COHORT_READ(t.lookup_bytes_per_s, e, "lookup_bytes_per_s", where);
      COHORT_READ(t.update_bytes_per_s, e, "update_bytes_per_s", where);
      p.table_rates.push_back(t);
    }
    if (auto problem = table_rates_problem(p.table_rates); !problem.empty())
      return make_error(errc::invalid_argument, w + ".table_rates" + problem);
  }
  if (!j.contains("link") || !j["link"].is_object()) return make_error(errc::invalid_argument, w + ".link: missing");
  COHORT_READ(p.link.bandwidth_bytes_per_s, j["link"], "bandwidth_bytes_per_s", w + ".link");
  COHORT_READ(p.link.latency_s, j["link"], "latency_s", w + ".link");
  if (j.contains("process_links")) {  // added 2026-12-05: optional
    if (!j["process_links"].is_object())
      return make_error(errc::invalid_argument, w + ".process_links: must be an object of data planes");
    for (const auto& [plane, cost] : j["process_links"].items()) {
      const std::string where = w + ".process_links." + plane;
      if (plane != "tcp" && plane != "ucx")
        return make_error(errc::invalid_argument, where + ": the data planes are tcp and ucx");
      process_link c;
      COHORT_READ(c.cost.bandwidth_bytes_per_s, cost, "bandwidth_bytes_per_s", where);
      COHORT_READ(c.cost.latency_s, cost, "latency_s", where);
      if (!(c.cost.bandwidth_bytes_per_s > 0) || !std::isfinite(c.cost.bandwidth_bytes_per_s) ||
          !std::isfinite(c.cost.latency_s))
        return make_error(errc::invalid_argument,
                          where + ": bandwidth must be positive and finite, the latency finite");
      // (profiles of 2026-12-05 to -07 kept a per-step term here instead: ignored, refit anew)
      if (cost.contains("by_processes")) {
        const json& by = cost["by_processes"];
        if (!by.is_object())
          return make_error(errc::invalid_argument, where + ".by_processes: must be an object by process count");
        for (const auto& [count, fit] : by.items()) {
          const std::string at = where + ".by_processes." + count;
          char* end = nullptr;
          const long n = std::strtol(count.c_str(), &end, 10);
          if (count.empty() || *end != '\0' || n < 2 || n > (1 << 16))
            return make_error(errc::invalid_argument, at + ": the key must be a process count from 2 to 65536");
          if (!fit.is_object()) return make_error(errc::invalid_argument, at + ": must be an object");
          job_link jl;
          COHORT_READ(jl.slowdown, fit, "slowdown", at);
          COHORT_READ(jl.refits, fit, "refits", at);
          if (fit.contains("bandwidth_slowdown")) {  // added 2026-12-07 evening: optional
            COHORT_READ(jl.bandwidth_slowdown, fit, "bandwidth_slowdown", at);
            COHORT_READ(jl.bandwidth_refits, fit, "bandwidth_refits", at);
          }
          for (auto [key, v] :
               {std::pair<const char*, double>{"slowdown", jl.slowdown}, {"bandwidth_slowdown", jl.bandwidth_slowdown}})
            if (!(v >= min_link_slowdown && v <= max_link_slowdown))
              return make_error(errc::invalid_argument, at + "." + key + ": must lie in [1/16, 4096]");
          c.by_processes[static_cast<int>(n)] = jl;
        }
      }
      p.process_links[plane] = c;
    }
  }
  if (!j.contains("efficiency") || !j["efficiency"].is_object())
    return make_error(errc::invalid_argument, w + ".efficiency: missing");
  const json& e = j["efficiency"];
  COHORT_READ(p.eff.gemm, e, "gemm", w + ".efficiency");
  COHORT_READ(p.eff.memory, e, "memory", w + ".efficiency");
  COHORT_READ(p.eff.link, e, "link", w + ".efficiency");
  COHORT_READ(p.eff.per_op_seconds, e, "per_op_seconds", w + ".efficiency");
  if (e.contains("per_task_seconds")) COHORT_READ(p.eff.per_task_seconds, e, "per_task_seconds", w + ".efficiency");
  if (e.contains("per_step_seconds")) COHORT_READ(p.eff.per_step_seconds, e, "per_step_seconds", w + ".efficiency");
  if (e.contains("per_rank_seconds")) COHORT_READ(p.eff.per_rank_seconds, e, "per_rank_seconds", w + ".efficiency");
  if (e.contains("per_rank_step_seconds") && !e.contains("per_step_seconds")) {
    // profiles before 2026-11-30 charged x per rank and step: the same as x per step plus x per extra rank
    COHORT_READ(p.eff.per_step_seconds, e, "per_rank_step_seconds", w + ".efficiency");
    p.eff.per_rank_seconds = p.eff.per_step_seconds;
  }
#undef COHORT_READ
  if (p.cores < 1 || p.flops_f32_per_core <= 0 || p.memory_bandwidth_bytes_per_s <= 0 ||
      p.link.bandwidth_bytes_per_s <= 0 || p.eff.gemm <= 0 || p.eff.memory <= 0 || p.eff.link <= 0)
    return make_error(errc::invalid_argument, w + ": cores, FLOP/s, bandwidths and efficiencies must be positive");
  if (!(p.optimizer_bytes_per_s >= 0))
    return make_error(errc::invalid_argument, w + ".optimizer_bytes_per_s: must be 0 (not measured) or positive");
  if (!(p.gemm_bytes_per_s >= 0))
    return make_error(errc::invalid_argument, w + ".gemm_bytes_per_s: must be 0 (not measured) or positive");
  if (!(p.lookup_bytes_per_s >= 0))
    return make_error(errc::invalid_argument, w + ".lookup_bytes_per_s: must be 0 (not measured) or positive");
  if (!(p.sparse_update_bytes_per_s >= 0))
    return make_error(errc::invalid_argument, w + ".sparse_update_bytes_per_s: must be 0 (not measured) or positive");
  if (auto problem = efficiency_problem(p.eff); !problem.empty())
    return make_error(errc::invalid_argument,
                      w + "." + problem + "; --cluster.calibrate measures this machine again and rewrites the file");
  p.source = path;
  return p;
}

status save_profile(const std::string& path, const machine_profile& p) {
  if (auto problem = efficiency_problem(p.eff); !problem.empty())
    return make_error(errc::invalid_argument, "the profile is not saved to " + path + ": " + problem);
  json j = {{"cohort_profile", 1},
            {"cores", p.cores},
            {"flops_f32_per_core", p.flops_f32_per_core},
            {"memory_bandwidth_bytes_per_s", p.memory_bandwidth_bytes_per_s},
            {"cache_bytes", p.cache_bytes},
            {"cache_bandwidth_bytes_per_s", p.cache_bandwidth_bytes_per_s},
            {"optimizer_bytes_per_s", p.optimizer_bytes_per_s},
            {"gemm_bytes_per_s", p.gemm_bytes_per_s},
            {"lookup_bytes_per_s", p.lookup_bytes_per_s},
            {"sparse_update_bytes_per_s", p.sparse_update_bytes_per_s},
            {"link", {{"bandwidth_bytes_per_s", p.link.bandwidth_bytes_per_s}, {"latency_s", p.link.latency_s}}},
            {"efficiency",
             {{"gemm", p.eff.gemm},
              {"memory", p.eff.memory},
              {"link", p.eff.link},
              {"per_op_seconds", p.eff.per_op_seconds},
              {"per_task_seconds", p.eff.per_task_seconds},
              {"per_step_seconds", p.eff.per_step_seconds},
              {"per_rank_seconds", p.eff.per_rank_seconds}}},
            {"refits", p.refits}};
  for (const auto& t : p.table_rates)
    j["table_rates"].push_back({{"table_bytes", t.table_bytes},
                                {"lookup_bytes_per_s", t.lookup_bytes_per_s},
                                {"update_bytes_per_s", t.update_bytes_per_s}});
  for (const auto& [plane, c] : p.process_links) {
    json link = {{"bandwidth_bytes_per_s", c.cost.bandwidth_bytes_per_s}, {"latency_s", c.cost.latency_s}};
    for (const auto& [n, fit] : c.by_processes)
      link["by_processes"][std::to_string(n)] = {{"slowdown", fit.slowdown},
                                                 {"refits", fit.refits},
                                                 {"bandwidth_slowdown", fit.bandwidth_slowdown},
                                                 {"bandwidth_refits", fit.bandwidth_refits}};
    j["process_links"][plane] = std::move(link);
  }
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return make_error(errc::io_error, "cannot write the profile " + tmp);
    out << j.dump(2) << "\n";
    if (!out) return make_error(errc::io_error, "cannot write the profile " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return make_error(errc::io_error, "cannot replace the profile " + path + ": " + ec.message());
  return {};
}
topology local_topology(const machine_profile& p, int ranks, int threads, int processes, const std::string& plane) {
  topology t;
  ranks = std::max(1, ranks);
  threads = std::max(1, threads);
  const double kernel_threads = std::max(1, threads / ranks);  // as the runtime splits them
  t.devices = ranks;
  t.devices_per_machine = ranks;
  t.speed = {p.flops_f32_per_core * kernel_threads,
             p.memory_bandwidth_bytes_per_s * kernel_threads,
             p.cache_bytes,
             p.cache_bandwidth_bytes_per_s * kernel_threads,
             /*gemm_packs_operands=*/true,
             p.optimizer_bytes_per_s,  // the optimizer runs on the rank's own thread
             p.gemm_bytes_per_s * kernel_threads};
  t.shared_cores = std::min(threads, std::max(1, p.cores));
  double memory = detect_memory_bytes();
  t.memory_bytes = (memory > 0 ? memory : 8e9) / ranks;
  t.intra = t.inter = p.link;
  if (processes > 1 && ranks % processes == 0) {  // a machine here is one process of the job
    t.devices_per_machine = ranks / processes;
    const auto measured = p.process_links.find(plane);
    t.inter = measured != p.process_links.end() ? job_link_cost(measured->second, processes) : unmeasured_process_link;
  }
  return t;
}

link_cost slowed(const link_cost& c, double latency, double bandwidth) {
  return {c.bandwidth_bytes_per_s / bandwidth, c.latency_s * latency};
}

link_cost job_link_cost(const process_link& l, int processes) {
  auto fit = l.by_processes.upper_bound(processes);  // the first count above; the one before is ours
  if (fit == l.by_processes.begin()) return l.cost;
  return slowed(l.cost, std::prev(fit)->second.slowdown, std::prev(fit)->second.bandwidth_slowdown);
}

std::string describe(const machine_profile& p) {
  std::string between;
  for (const auto& [plane, c] : p.process_links) {
    char l[128];
    std::snprintf(l, sizeof l, "%s%s %.2f GB/s + %.1f us", between.empty() ? ", between processes " : ", ",
                  plane.c_str(), c.cost.bandwidth_bytes_per_s / 1e9, c.cost.latency_s * 1e6);
    between += l;
    for (const auto& [n, fit] : c.by_processes) {
      std::snprintf(l, sizeof l, "%slatency x%.2g, bandwidth /%.2g for %d processes",
                    n == c.by_processes.begin()->first ? " (" : ", ", fit.slowdown, fit.bandwidth_slowdown, n);
      between += l;
    }
    if (!c.by_processes.empty()) between += ")";
  }
  std::string by_size;  // "(0.26 MB 3.1/1.2, ...)": lookup/update GB/s at each measured size
  for (const auto& t : p.table_rates) {
    char l[64];
    std::snprintf(l, sizeof l, "%s%.3g MB %.2f/%.2f", by_size.empty() ? " (by table size, lookup/update: " : ", ",
                  t.table_bytes / 1e6, t.lookup_bytes_per_s / 1e9, t.update_bytes_per_s / 1e9);
    by_size += l;
  }
  if (!by_size.empty()) by_size += ")";
  char b[1024];
  std::snprintf(b, sizeof b,
                "%d cores, %.1f GFLOP/s per core (GEMM operands %.0f GB/s), %.1f GB/s memory, %.0f GB/s in %.0f MiB "
                "cache, optimizer %.0f GB/s, lookup %.2f GB/s, sparse update %.2f GB/s%s, link %.2f GB/s + %.1f us%s; "
                "efficiency gemm %.2f, "
                "memory %.2f, link %.2f, %.1f us per op; runtime %.0f us per task, %.0f us per step, %.0f us per extra "
                "rank (%s%s)",
                p.cores, p.flops_f32_per_core / 1e9, p.gemm_bytes_per_s / 1e9, p.memory_bandwidth_bytes_per_s / 1e9,
                p.cache_bandwidth_bytes_per_s / 1e9, p.cache_bytes / (1 << 20), p.optimizer_bytes_per_s / 1e9,
                p.lookup_bytes_per_s / 1e9, p.sparse_update_bytes_per_s / 1e9, by_size.c_str(),
                p.link.bandwidth_bytes_per_s / 1e9, p.link.latency_s * 1e6, between.c_str(), p.eff.gemm, p.eff.memory,
                p.eff.link, p.eff.per_op_seconds * 1e6, p.eff.per_task_seconds * 1e6, p.eff.per_step_seconds * 1e6,
                p.eff.per_rank_seconds * 1e6, p.source.c_str(),
                p.refits > 0 ? (", " + std::to_string(p.refits) + " refits").c_str() : "");
  return b;
}

}  // namespace cohort::planner
