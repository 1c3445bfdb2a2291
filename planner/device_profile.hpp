// What a kind of device reaches: the cost model's efficiencies for the devices of a cluster
// file, read from a device profile (configs/devices/*.json, docs/planner.md), never from this
// machine's profile — a refit of one device kind never changes the predictions for another.
// The GEMM efficiency is a table over the size of one GEMM call in FLOPs (published cuBLAS
// figures, or measured on the device), the rest single fractions and per-operation costs.
//
//   result<device_profile> d = load_device_profile("configs/devices/a100-sxm4-80gb.json");
//   if (!d) return d.error();          // "...json: efficiency.gemm_by_flops[2]: the FLOPs must ascend"
//   double e = d->eff.gemm_at(/*flops=*/2.0 * 4096 * 4096 * 4096);   // interpolated from the table
//   std::cout << d->model << " (" << d->source << ")\n";
#pragma once

#include <string>
#include <vector>

#include "graph/error.hpp"
#include "planner/cost_model.hpp"

namespace cohort::planner {

struct device_profile {
  std::string model;                 // the device model it describes ("A100-SXM4-80GB")
  efficiency eff;                    // gemm_by_flops, memory, link, per-op and per-step seconds
  std::vector<std::string> sources;  // where each figure comes from, as the file states it
  std::string source = "defaults";   // the file it was read from, or "defaults"
};

/// Reads and checks a device profile: {"cohort_device_profile": 1, "model", "sources": [..],
/// "efficiency": {"gemm_by_flops": [[flops, eff], ..], "memory", "link", "per_op_seconds",
/// "per_step_seconds"}}. Every efficiency in (0, 1] (efficiency_problem), every key known.
/// Errors name the file and the field; a missing file is errc::not_found.
result<device_profile> load_device_profile(const std::string& path);

/// The same from text; `origin` starts every message.
result<device_profile> parse_device_profile(const std::string& text, const std::string& origin);

/// No profile for the device: the cost model's uncalibrated defaults, without the runtime
/// overhead terms of this machine; `model` says which device lacked one.
device_profile default_device_profile(const std::string& model);

}  // namespace cohort::planner
