// cohort-allreduce: cohort's allreduce between processes, timed per size the way
// nccl-tests and ../shared/bench/allreduce_torch.py report it (time per op, algbw, busbw),
// one JSON line from process 0. A benchmark, not a test: bench/allreduce.sh runs it beside
// gloo and Open MPI.
//
//   build/apps/cohort-allreduce --launch.nproc=2                      # 4 KiB .. 64 MiB, TCP
//   build/apps/cohort-allreduce --launch.nproc=2 --bench.min=1048576 --bench.max=1048576
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/driver/options.hpp"
#include "apps/driver/processes.hpp"
#include "apps/driver/report.hpp"
#include "transport/collectives.hpp"

using namespace cohort;
using namespace cohort::apps;
using json = nlohmann::json;

int main(int argc, char** argv) {
  std::int64_t min_bytes = 4 << 10, max_bytes = 64 << 20, budget = std::int64_t{1} << 30;
  std::string algorithm = "auto";
  process_options dist;
  option_set opts("cohort-allreduce", "Times cohort's allreduce (sum, f32) between the processes of a job.");
  opts.add("bench.min", min_bytes, "smallest buffer in bytes (doubling up to bench.max)")
      .add("bench.max", max_bytes, "largest buffer in bytes")
      .add("bench.budget", budget, "bytes reduced per size (caps the iterations, as the gloo script does)")
      .add("bench.algorithm", algorithm,
           "auto (what training uses: transport::allreduce_algorithm_for), ring or recursive-doubling");
  dist.add_to(opts);
  auto parsed = opts.parse(argc, argv);
  if (!parsed) return fail("cohort-allreduce", parsed.error().message, 2);
  if (*parsed == parse_outcome::help_shown) return 0;
  if (auto st = dist.finish(opts); !st) return fail("cohort-allreduce", st.error().message, 2);
  if (dist.launches()) return launch_processes(argc, argv, dist, opts);
  if (!dist.multi_process())
    return fail("cohort-allreduce", "run it with --launch.nproc=N (or RANK and WORLD_SIZE)", 2);
  if (min_bytes < 4 || max_bytes < min_bytes) return fail("cohort-allreduce", "need 4 <= bench.min <= bench.max", 2);
  if (algorithm != "auto" && algorithm != "ring" && algorithm != "recursive-doubling")
    return fail("cohort-allreduce", "--bench.algorithm: auto, ring or recursive-doubling, not '" + algorithm + "'", 2);

  auto group = form_process_group(dist);
  if (!group) return fail("cohort-allreduce", group.error().message, 1);
  process_group& g = **group;
  const int world = g.world();
  auto fabric = g.connect(planner::parallel_plan{.dp = world});  // one rank per process
  if (!fabric) return fail("cohort-allreduce", fabric.error().message, 1);
  transport::channel& ch = (*fabric)->endpoint(g.process());
  std::vector<int> ring;
  for (int r = 0; r < world; ++r) ring.push_back(r);
  const double f = 2.0 * (world - 1) / world;
  json rows = json::array();
  std::uint64_t tag = 1;
  // The first few hundred milliseconds after start-up run slow (the processes are still
  // settling: lazy symbol binding, first page faults, the launcher's children starting):
  // wait them out once, together.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  if (auto st = transport::barrier(ch, ring, {.tag = tag++, .timeout = std::chrono::seconds(60)}); !st)
    return fail("cohort-allreduce", st.error().message, 1);
  for (std::int64_t size = min_bytes; size <= max_bytes; size *= 2) {
    tensor x = tensor::full({size / 4}, 0.f);  // zeros stay zeros: no overflow over many ops
    const std::int64_t iters = std::max<std::int64_t>(5, std::min<std::int64_t>(500, budget / size));
    transport::collective_options o{.tag = 0, .timeout = std::chrono::seconds(60)};
    auto once = [&]() -> status {
      o.tag = tag++;
      if (algorithm == "ring") return transport::allreduce_ring(ch, ring, x, o);
      if (algorithm == "recursive-doubling") return transport::allreduce_recursive_doubling(ch, ring, x, o);
      return transport::allreduce(ch, ring, x, o);
    };
    for (int i = 0; i < 3; ++i)
      if (auto st = once(); !st) return fail("cohort-allreduce", st.error().message, 1);
    if (auto st = transport::barrier(ch, ring, {.tag = tag++, .timeout = std::chrono::seconds(60)}); !st)
      return fail("cohort-allreduce", st.error().message, 1);
    std::vector<double> ts;
    for (std::int64_t i = 0; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      if (auto st = once(); !st) return fail("cohort-allreduce", st.error().message, 1);
      ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    double mean = 0;
    for (double t : ts) mean += t / static_cast<double>(iters);
    std::vector<double> means(static_cast<std::size_t>(world), 0.0);
    means[static_cast<std::size_t>(g.process())] = mean;
    auto all = g.control->sum(static_cast<std::uint64_t>(size), means);  // the slowest rank's mean
    if (!all) return fail("cohort-allreduce", all.error().message, 1);
    mean = *std::max_element(all->begin(), all->end());
    std::sort(ts.begin(), ts.end());
    const double med = ts[ts.size() / 2];
    const auto b = static_cast<double>(size);
    rows.push_back({{"bytes", size},
                    {"iters", iters},
                    {"us_mean", mean * 1e6},
                    {"us_median", med * 1e6},
                    {"us_max", ts.back() * 1e6},
                    {"algbw_GBps", b / mean / 1e9},
                    {"busbw_GBps", f * b / mean / 1e9},
                    {"busbw_median_GBps", f * b / med / 1e9}});
  }
  if (auto st = g.control->finish(std::chrono::seconds(10)); !st)
    return fail("cohort-allreduce", st.error().message, 1);
  if (g.process() == 0)
    std::printf("%s\n", json({{"bench", "cohort_allreduce"},
                              {"transport", to_string(dist.transport)},
                              {"algorithm", algorithm},
                              {"world", world},
                              {"dtype", "float32"},
                              {"results", rows}})
                            .dump()
                            .c_str());
  return 0;
}
