// The micro-benchmarks behind --cluster.calibrate: GEMM, memory and cache bandwidth, the
// optimizer's update rate, the in-process allreduce, and the runtime's own overhead
// (actors/runtime_overhead.cpp).
#include "actors/calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "actors/link_measure.hpp"
#include "actors/runtime_overhead.hpp"
#include "graph/dsl.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/optimizer.hpp"
#include "transport/collectives.hpp"
#include "transport/in_process.hpp"

namespace cohort::actors {
namespace {

using clock_type = std::chrono::steady_clock;
using planner::gemm_rates;
using planner::gemm_timing;
using planner::machine_profile;

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
  double s = seconds_of(
                 [&] {
                   for (int i = 0; i < inner; ++i) {
                     src[static_cast<std::size_t>(i) % floats] += 1.0f;  // keep the copies from being merged
                     std::copy(src.begin(), src.end(), dst.begin());
                   }
                 },
                 7) /
             inner;
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

// The embedding path on one core, in bytes of table rows per second: embedding_bag pooling
// 64 Ki ids (bags of one) from a table of `rows` 16-wide rows, the ids skewed towards the
// first rows (u^2: click logs' hot ids), and the sparse SGD update of the same entries
// (summed by row, then applied) — the kernels the runtime runs.
planner::table_rate measure_embedding_rates(std::int64_t rows) {
  constexpr std::int64_t dim = 16, n = std::int64_t{1} << 16;
  graph g;
  var t = g.parameter("t", {rows, dim}, init_spec::zeros());
  var ids = g.input("ids", {n, 1}, dtype::i32);
  (void)embedding_bag(t, ids, false);
  const node& op = g.nodes().back();
  tensor table = tensor::full({rows, dim}, 0.01f), id_tensor = tensor::empty({n, 1}, dtype::i32);
  std::uint64_t x = 88172645463325252ull;  // xorshift: the same ids on every run
  for (std::int64_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const double u = static_cast<double>(x >> 11) / 9007199254740992.0;
    id_tensor.data<std::int32_t>()[i] = static_cast<std::int32_t>(u * u * static_cast<double>(rows));
  }
  std::vector<tensor> in{table, id_tensor};
  std::vector<tensor> out{tensor::zeros({n, dim})};
  auto kernels_table = kernels::cpu_kernels();
  const double row_bytes = static_cast<double>(n * dim) * 4.0;
  planner::table_rate r;
  r.table_bytes = static_cast<double>(rows * dim) * 4.0;
  r.lookup_bytes_per_s = row_bytes / seconds_of([&] { (void)kernels_table[op_kind::embedding_bag]({op, in, out}); }, 7);
  const optimizer_config sgd = sgd_config{.lr = 1e-3f};
  auto state = kernels::make_state(table, sgd);
  kernels::row_sums sums(n, dim);
  const tensor values = tensor::full({n, dim}, 1e-3f);
  r.update_bytes_per_s = row_bytes / seconds_of(
                                         [&] {
                                           sums.gather(id_tensor.data<std::int32_t>(), values.data<float>(), n);
                                           kernels::apply_sparse_update(table, sums, state, sgd);
                                         },
                                         7);
  return r;
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

}  // namespace

machine_profile calibrate(int threads, const progress_fn& progress) {
  constexpr std::int64_t measurements = 6;  // GEMM, memory, cache, optimizer, link, runtime overhead
  machine_profile p;
  p.cores = planner::detect_cores();
  const gemm_rates gemm = measure_gemm_rates();
  p.flops_f32_per_core = gemm.flops_per_s;
  p.gemm_bytes_per_s = gemm.bytes_per_s;
  report_progress(progress, 1, measurements);
  p.memory_bandwidth_bytes_per_s = copy_bytes_per_s(64u << 20);
  report_progress(progress, 2, measurements);
  p.cache_bytes = last_level_cache_bytes();
  p.cache_bandwidth_bytes_per_s = copy_bytes_per_s(static_cast<std::size_t>(p.cache_bytes / 4));  // src + dst = half
  report_progress(progress, 3, measurements);
  p.optimizer_bytes_per_s = optimizer_bytes_per_s();
  // tables of 256 KiB (in the caches), 4 MiB, 64 MiB (the scalar rates: beyond the caches) and
  // 512 MiB (beyond the TLB's reach too, where the memory allows)
  const double memory = planner::detect_memory_bytes();
  for (int log2_rows : {12, 16, 20, 23}) {
    const std::int64_t rows = std::int64_t{1} << log2_rows;
    if (log2_rows == 23 && !(memory > 16.0 * static_cast<double>(rows) * 64.0)) break;
    p.table_rates.push_back(measure_embedding_rates(rows));
    if (log2_rows == 20) {
      p.lookup_bytes_per_s = p.table_rates.back().lookup_bytes_per_s;
      p.sparse_update_bytes_per_s = p.table_rates.back().update_bytes_per_s;
    }
  }
  report_progress(progress, 4, measurements);
  // two ranks in this process, recursive doubling at 4 KiB and 4 MiB (actors/link_measure.hpp)
  {
    transport::in_process_fabric fabric(2);
    p.link = measure_link(fabric.endpoint(0), fabric.endpoint(1));
  }
  // and between two processes of a job on this machine, over each data plane that starts here
  for (const char* plane : {"tcp", "ucx"}) {
    auto between = measure_process_link(plane);
    if (between)
      p.process_links[plane].cost = *between;
    else
      std::fprintf(stderr, "calibration: no %s link between processes measured (%s)\n", plane,
                   between.error().message.c_str());
  }
  report_progress(progress, 5, measurements);
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
    std::fprintf(stderr,
                 "calibration: runtime overhead %.1f us per task, %.0f us per step, %.0f us per extra rank "
                 "(tiny model, measured/fitted us per step: %s)\n",
                 o->per_task_s * 1e6, o->per_step_s * 1e6, o->per_rank_s * 1e6, fit.c_str());
  } else {
    std::fprintf(stderr, "warning: calibration: the runtime's overhead was not measured (%s); it counts as 0\n",
                 o.error().message.c_str());
  }
  report_progress(progress, measurements, measurements);
  p.source = "calibrated";
  return p;
}
}  // namespace cohort::actors
