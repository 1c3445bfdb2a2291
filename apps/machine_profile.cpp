// The machine profile: defaults, the JSON file, calibration micro-benchmarks.
#include "apps/machine_profile.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "apps/runtime_calibration.hpp"
#include "graph/dsl.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/optimizer.hpp"
#include "transport/collectives.hpp"
#include "transport/in_process.hpp"

namespace cohort::apps {
namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

// The fastest of `repeats` timings: a peak is what the roofline needs, and on a shared
// machine every disturbance only ever makes a run slower.
double seconds_of(const std::function<void()>& f, int repeats) {
  f();  // warm
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeats; ++i) {
    auto t0 = clock_type::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  return best;
}

// The fastest of `repeats` runs of cohort's matmul kernel on [m, k] x [k, n].
double gemm_seconds(std::int64_t m, std::int64_t k, std::int64_t n, int repeats) {
  graph g;
  var a = g.input("a", {m, k}), b = g.input("b", {k, n});
  (void)matmul(a, b);
  const node& op = g.nodes().back();
  std::vector<tensor> in{tensor::full({m, k}, 0.5f), tensor::full({k, n}, 0.25f)};
  std::vector<tensor> out{tensor::zeros({m, n})};
  auto table = kernels::cpu_kernels();
  return seconds_of([&] { (void)table[op_kind::matmul]({op, in, out}); }, repeats);
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

namespace {

// The arithmetic rate and the operand traffic rate of one core's GEMM, from a square
// 512 x 512 x 512 (arithmetic-heavy) and a skinny 32 x 512 x 512 (traffic-heavy: the weight
// is packed for 32 rows) — the shapes small micro-batches give.
gemm_rates measure_gemm_rates() {
  auto timing = [](std::int64_t m, std::int64_t k, std::int64_t n, int repeats) {
    return gemm_timing{2.0 * static_cast<double>(m * k * n), 4.0 * static_cast<double>(m * k + k * n + m * n),
                       gemm_seconds(m, k, n, repeats)};
  };
  return solve_gemm_rates(timing(512, 512, 512, 25), timing(32, 512, 512, 200));
}

double copy_bytes_per_s(std::size_t bytes) {
  const std::size_t floats = bytes / sizeof(float);
  std::vector<float> src(floats, 1.0f), dst(floats, 0.0f);
  const int inner = static_cast<int>(std::max<std::size_t>(1, (64u << 20) / bytes));  // ~64 MiB per timing
  double s = seconds_of([&] {
    for (int i = 0; i < inner; ++i) {
      src[static_cast<std::size_t>(i) % floats] += 1.0f;  // keep the copies from being merged
      std::copy(src.begin(), src.end(), dst.begin());
    }
  }, 7) / inner;
  return 2.0 * static_cast<double>(floats) * sizeof(float) / s;  // read + write
}

// What one core's optimizer update streams per second: AdamW (the heavier rule: parameters,
// gradients and two state slots read, parameters and state written, 7 x 4 bytes per parameter)
// over 4 Mi parameters, 112 MiB of traffic from a 64 MiB working set, beyond the cache.
// The kernels vectorize it; the roofline's memory term had priced it 3-4x slow.
double optimizer_bytes_per_s() {
  constexpr std::int64_t n = std::int64_t{4} << 20;
  tensor param = tensor::full({n}, 0.5f), grad = tensor::full({n}, 1e-3f);
  const optimizer_config cfg = adamw_config{};
  auto state = kernels::make_state(param, cfg);
  double s = seconds_of([&] { kernels::apply_update(param, grad, state, cfg); }, 7);
  return 7.0 * 4.0 * static_cast<double>(n) / s;
}

// Two threads allreduce `floats` floats `repeats` times by recursive doubling (one exchange);
// the fastest allreduce's seconds.
double allreduce_seconds(std::int64_t floats, int repeats) {
  transport::in_process_fabric fabric(2);
  std::vector<double> per(2, 0.0);
  auto run = [&](int rank) {
    tensor buf = tensor::full({floats}, 1.0f);
    transport::collective_options o;
    o.timeout = std::chrono::milliseconds(10000);
    std::vector<double> times;
    for (int i = 0; i < repeats + 1; ++i) {
      o.tag = static_cast<std::uint64_t>(i);
      auto t0 = clock_type::now();
      (void)transport::allreduce_recursive_doubling(fabric.endpoint(rank), {0, 1}, buf, o);
      if (i > 0) times.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    // the fastest, as for the other peaks: a disturbance only ever makes an allreduce slower
    // (the median swung 3-12 GB/s between calibrations on this shared machine)
    per[static_cast<std::size_t>(rank)] = *std::min_element(times.begin(), times.end());
  };
  std::thread other(run, 1);
  run(0);
  other.join();
  return std::max(per[0], per[1]);
}

// /sys/devices/system/cpu/cpu0/cache/index*/ : the highest level's size; 8 MiB if unknown.
double last_level_cache_bytes() {
  double best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), size(dir + "size");
    int l = 0;
    std::string text;
    if (!(level >> l) || !(size >> text) || text.empty()) continue;
    double bytes = std::atof(text.c_str());
    if (text.back() == 'K') bytes *= 1024;
    if (text.back() == 'M') bytes *= 1024 * 1024;
    if (l > best_level) best_level = l, best = bytes;
  }
  return best > 0 ? best : 8.0 * (1 << 20);
}

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

std::string default_profile_path() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/cohort/profile.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/cohort/profile.json";
  return "cohort-profile.json";
}

result<machine_profile> load_profile(const std::string& path) {
  machine_profile p;
  p.cores = planner::detect_cores();
  std::ifstream in(path);
  if (!in) return p;
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(errc::invalid_argument, path + ": not a JSON object");
  if (!j.contains("cohort_profile")) return make_error(errc::invalid_argument, path + ": not a cohort profile (no \"cohort_profile\")");
#define COHORT_READ(target, obj, key, where)                   \
  {                                                           \
    auto v = field<std::decay_t<decltype(target)>>(obj, key, where); \
    if (!v) return v.error();                                 \
    target = *v;                                              \
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
  if (!j.contains("link") || !j["link"].is_object()) return make_error(errc::invalid_argument, w + ".link: missing");
  COHORT_READ(p.link.bandwidth_bytes_per_s, j["link"], "bandwidth_bytes_per_s", w + ".link");
  COHORT_READ(p.link.latency_s, j["link"], "latency_s", w + ".link");
  if (!j.contains("efficiency") || !j["efficiency"].is_object()) return make_error(errc::invalid_argument, w + ".efficiency: missing");
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
  if (p.cores < 1 || p.flops_f32_per_core <= 0 || p.memory_bandwidth_bytes_per_s <= 0 || p.link.bandwidth_bytes_per_s <= 0 ||
      p.eff.gemm <= 0 || p.eff.memory <= 0 || p.eff.link <= 0)
    return make_error(errc::invalid_argument, w + ": cores, FLOP/s, bandwidths and efficiencies must be positive");
  if (!(p.optimizer_bytes_per_s >= 0))
    return make_error(errc::invalid_argument, w + ".optimizer_bytes_per_s: must be 0 (not measured) or positive");
  if (!(p.gemm_bytes_per_s >= 0))
    return make_error(errc::invalid_argument, w + ".gemm_bytes_per_s: must be 0 (not measured) or positive");
  p.source = path;
  return p;
}

status save_profile(const std::string& path, const machine_profile& p) {
  json j = {{"cohort_profile", 1},
            {"cores", p.cores},
            {"flops_f32_per_core", p.flops_f32_per_core},
            {"memory_bandwidth_bytes_per_s", p.memory_bandwidth_bytes_per_s},
            {"cache_bytes", p.cache_bytes},
            {"cache_bandwidth_bytes_per_s", p.cache_bandwidth_bytes_per_s},
            {"optimizer_bytes_per_s", p.optimizer_bytes_per_s},
            {"gemm_bytes_per_s", p.gemm_bytes_per_s},
            {"link", {{"bandwidth_bytes_per_s", p.link.bandwidth_bytes_per_s}, {"latency_s", p.link.latency_s}}},
            {"efficiency",
             {{"gemm", p.eff.gemm}, {"memory", p.eff.memory}, {"link", p.eff.link}, {"per_op_seconds", p.eff.per_op_seconds},
              {"per_task_seconds", p.eff.per_task_seconds}, {"per_step_seconds", p.eff.per_step_seconds},
              {"per_rank_seconds", p.eff.per_rank_seconds}}},
            {"refits", p.refits}};
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

machine_profile calibrate(int threads) {
  machine_profile p;
  p.cores = planner::detect_cores();
  const gemm_rates gemm = measure_gemm_rates();
  p.flops_f32_per_core = gemm.flops_per_s;
  p.gemm_bytes_per_s = gemm.bytes_per_s;
  p.memory_bandwidth_bytes_per_s = copy_bytes_per_s(64u << 20);
  p.cache_bytes = last_level_cache_bytes();
  p.cache_bandwidth_bytes_per_s = copy_bytes_per_s(static_cast<std::size_t>(p.cache_bytes / 4));  // src + dst = half
  p.optimizer_bytes_per_s = optimizer_bytes_per_s();
  // two ranks, recursive doubling at both sizes: t = alpha + bytes / beta (one exchange of the
  // whole buffer; planner::allreduce_recursive_doubling_seconds prices it the same way)
  const std::int64_t small = 1024, large = 1 << 20;  // 4 KiB, 4 MiB
  double ts = allreduce_seconds(small, 50), tl = allreduce_seconds(large, 20);
  double per_byte = std::max(1e-13, (tl - ts) / (static_cast<double>(large - small) * 4.0));  // = 1 / beta
  p.link.bandwidth_bytes_per_s = 1.0 / per_byte;
  p.link.latency_s = std::max(0.0, ts - static_cast<double>(small) * 4.0 * per_byte);
  if (auto o = measure_runtime_overhead(p, threads); o) {
    p.eff.per_task_seconds = o->per_task_s;
    p.eff.per_step_seconds = o->per_step_s;
    p.eff.per_rank_seconds = o->per_rank_s;
    std::string fit;
    for (const auto& s : o->samples) {
      char b[96];
      std::snprintf(b, sizeof b, "%s%s %.0f/%.0f", fit.empty() ? "" : ", ", s.plan.c_str(), s.measured_s * 1e6,
                    s.predicted_s * 1e6);
      fit += b;
    }
    std::fprintf(stderr, "calibration: runtime overhead %.1f us per task, %.0f us per step, %.0f us per extra rank "
                         "(tiny model, measured/fitted us per step: %s)\n",
                 o->per_task_s * 1e6, o->per_step_s * 1e6, o->per_rank_s * 1e6, fit.c_str());
  } else {
    std::fprintf(stderr, "warning: calibration: the runtime's overhead was not measured (%s); it counts as 0\n",
                 o.error().message.c_str());
  }
  p.source = "calibrated";
  return p;
}

planner::topology local_topology(const machine_profile& p, int ranks, int threads) {
  planner::topology t;
  ranks = std::max(1, ranks);
  threads = std::max(1, threads);
  const double kernel_threads = std::max(1, threads / ranks);  // as the runtime splits them
  t.devices = ranks;
  t.devices_per_machine = ranks;
  t.speed = {p.flops_f32_per_core * kernel_threads, p.memory_bandwidth_bytes_per_s * kernel_threads,
             p.cache_bytes, p.cache_bandwidth_bytes_per_s * kernel_threads, /*gemm_packs_operands=*/true,
             p.optimizer_bytes_per_s,  // the optimizer runs on the rank's own thread
             p.gemm_bytes_per_s * kernel_threads};
  t.shared_cores = std::min(threads, std::max(1, p.cores));
  double memory = planner::detect_memory_bytes();
  t.memory_bytes = (memory > 0 ? memory : 8e9) / ranks;
  t.intra = t.inter = p.link;
  return t;
}

std::string describe(const machine_profile& p) {
  char b[448];
  std::snprintf(b, sizeof b,
                "%d cores, %.1f GFLOP/s per core (GEMM operands %.0f GB/s), %.1f GB/s memory, %.0f GB/s in %.0f MiB cache, optimizer %.0f GB/s, link %.2f GB/s + %.1f us; efficiency gemm %.2f, "
                "memory %.2f, link %.2f, %.1f us per op; runtime %.0f us per task, %.0f us per step, %.0f us per extra rank (%s%s)",
                p.cores, p.flops_f32_per_core / 1e9, p.gemm_bytes_per_s / 1e9, p.memory_bandwidth_bytes_per_s / 1e9,
                p.cache_bandwidth_bytes_per_s / 1e9, p.cache_bytes / (1 << 20), p.optimizer_bytes_per_s / 1e9,
                p.link.bandwidth_bytes_per_s / 1e9,
                p.link.latency_s * 1e6, p.eff.gemm, p.eff.memory, p.eff.link, p.eff.per_op_seconds * 1e6,
                p.eff.per_task_seconds * 1e6, p.eff.per_step_seconds * 1e6, p.eff.per_rank_seconds * 1e6,
                p.source.c_str(), p.refits > 0 ? (", " + std::to_string(p.refits) + " refits").c_str() : "");
  return b;
}

}  // namespace cohort::apps
