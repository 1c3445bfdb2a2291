// This machine as the cost model sees it: per-core GEMM FLOP/s, memory bandwidth, the
// in-process link's alpha and beta, the link between two processes of a job on this machine
// for each data plane (tcp, ucx), and the efficiencies the planner applies on top —
// measured by --cluster.calibrate, refit after every auto-planned run, and kept in a JSON
// file (default $XDG_CACHE_HOME/cohort/profile.json, else ~/.cache/cohort/profile.json).
// Without a file the defaults below stand in, and the planner says so.
//
// The micro-benchmarks that measure it are actors::calibrate (actors/calibration.hpp).
//
//   result<machine_profile> p = load_profile(default_profile_path());   // missing file: defaults
//   if (!p) return p.error();                                           // malformed: names file and field
//   std::cout << describe(*p) << "\n";
//   topology t = local_topology(*p, /*ranks=*/4, /*threads=*/2);
//   topology job = local_topology(*p, /*ranks=*/4, /*threads=*/2, /*processes=*/2, "tcp");   // 2 ranks each
//   if (auto st = save_profile(default_profile_path(), *p); !st) return st;
#pragma once

#include <map>
#include <string>

#include "graph/error.hpp"
#include "planner/search.hpp"
#include "planner/table_placement.hpp"

namespace cohort::planner {

/// The range a refit slowdown is kept in (a profile outside it is refused; its message says
/// [1/16, 4096]).
inline constexpr double min_link_slowdown = 1.0 / 16, max_link_slowdown = 4096;

/// How much slower than calibrated a job of some number of processes finds the link between
/// them: refit from its runs (run_refit.hpp), a geometric running mean over `refits` runs.
struct job_link {
  double slowdown = 1;  // the calibrated latency times this (per message: receivers wake late)
  int refits = 0;
  /// The calibrated bandwidth over this: refit from the data-parallel reductions' tasks, where
  /// a job's plan reduces across its processes (their bytes share cores with its compute).
  double bandwidth_slowdown = 1;
  int bandwidth_refits = 0;
};

/// What a job of several processes on this machine pays for their link, per data plane.
struct process_link {
  link_cost cost;  // an allreduce over that fabric between two idle threads (actors::measure_process_link)
  /// By the job's process count: a job's own messages meet receivers that are busy or asleep
  /// (more so where processes outnumber cores), which a quiet measurement does not see.
  std::map<int, job_link> by_processes;
};

/// The link a job of `processes` processes is taken to see over `l`: the calibrated cost
/// slowed by the refit for that count, else for the largest smaller count refit, else as
/// calibrated.
link_cost job_link_cost(const process_link& l, int processes);
/// `c` with its latency times `latency` and its bandwidth over `bandwidth`.
link_cost slowed(const link_cost& c, double latency, double bandwidth = 1);

struct machine_profile {
  int cores = 1;
  double flops_f32_per_core = 50e9;            // one core's GEMM arithmetic rate (see gemm_bytes_per_s)
  double gemm_bytes_per_s = 0;                 // its operand traffic rate; 0: not measured, and
                                               // flops_f32_per_core is 512^3's whole rate
  double memory_bandwidth_bytes_per_s = 10e9;  // one core streaming a 64 MiB copy
  double cache_bytes = 8 << 20;                // the last-level cache
  double cache_bandwidth_bytes_per_s = 30e9;   // one core copying within half of it
  double optimizer_bytes_per_s = 0;            // one core's AdamW update over 64 MiB (0: not measured)
  /// One core's embedding path, in bytes of table rows per second (0: not measured): rows
  /// pooled by embedding_bag at Zipf-like ids over a table beyond the cache, and rows
  /// updated from sparse gradient entries (summed by row, then plain SGD).
  double lookup_bytes_per_s = 0;
  double sparse_update_bytes_per_s = 0;
  /// The same at several table sizes (ascending; empty: not measured, the rates above hold
  /// for every size): calibration measures a table in the caches and ones beyond them.
  std::vector<table_rate> table_rates;
  link_cost link{5e9, 10e-6};  // in-process fabric: allreduce between threads
  /// Between two processes of one job on this machine, by data plane ("tcp", "ucx"). Absent:
  /// not measured yet.
  std::map<std::string, process_link> process_links;
  efficiency eff;
  int refits = 0;                   // online refits folded in since calibration
  std::string source = "defaults";  // "defaults", "calibrated", or the file it came from
};

/// $XDG_CACHE_HOME/cohort/profile.json, else $HOME/.cache/cohort/profile.json, else ./cohort-profile.json.
std::string default_profile_path();

/// A missing file gives the defaults (source "defaults"); a malformed one is an error naming
/// the file and the field.
result<machine_profile> load_profile(const std::string& path);
/// Writes atomically (a temporary file renamed over the old one), creating the directory.
status save_profile(const std::string& path, const machine_profile& p);

/// One GEMM timing and what the rates are solved from it.
struct gemm_timing {
  double flops = 0, bytes = 0, seconds = 0;
};
struct gemm_rates {
  double flops_per_s = 0;
  double bytes_per_s = 0;  // 0: the timings did not separate (the square GEMM's whole rate then)
};
/// t = flops / F + bytes / B for both timings, solved for F and B; when noise makes either
/// term non-positive, F is the square GEMM's whole rate and B is 0.
gemm_rates solve_gemm_rates(const gemm_timing& square, const gemm_timing& skinny);

/// What a link between processes is taken to cost before it was measured (loopback TCP's
/// order of magnitude); the planner says so where it uses it.
inline constexpr link_cost unmeasured_process_link{1e9, 50e-6};

/// `ranks` ranks running on `threads` threads, as the runtime runs them: each rank computes on
/// max(1, threads / ranks) kernel threads, and all share min(threads, cores) cores (processor
/// sharing when ranks outnumber them); 1/ranks of the memory each. Spread over `processes`
/// processes of one job on this machine (contiguous blocks of ranks), a group within a process
/// takes the in-process link and one across processes the `plane`'s process link as a job of
/// that many processes sees it (job_link_cost; unmeasured_process_link when the profile has none).
topology local_topology(const machine_profile& p, int ranks, int threads, int processes = 1,
                        const std::string& plane = "tcp");

/// One line: "2 cores, 48.1 GFLOP/s per core, 12.3 GB/s memory, link 3.2 GB/s + 12 us, between
/// processes tcp 1.9 GB/s + 40 us (x3.1 for 2 processes), ..., (calibrated, 2 refits)".
std::string describe(const machine_profile& p);

}  // namespace cohort::planner
