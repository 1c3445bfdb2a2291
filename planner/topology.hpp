// The devices a plan runs on, seen as uniform: how many, grouped how to a machine, one speed
// and memory, one link inside a machine and one between (and the host CPUs beside the
// accelerators on a heterogeneous cluster). The planner's search prices every plan on it.
//
//   auto topo = topology_of(local_cluster(/*cores=*/4, /*memory=*/16e9, 50e9, 20e9));
//   if (!topo) return topo.error();
//   assert(topo->devices == 4 && !topo->host);
#pragma once

#include <optional>

#include "planner/cluster.hpp"
#include "planner/cost_model.hpp"

namespace cohort::planner {

/// The devices a plan runs on, seen as uniform: `devices` of one speed and memory, grouped
/// `devices_per_machine` to a machine, one link speed inside a machine and one between.
struct topology {
  int devices = 1;
  int devices_per_machine = 1;
  device_speed speed;
  double memory_bytes = 8e9;
  link_cost intra{1e10, 2e-6}, inter{1e9, 2e-5};
  /// > 0: the ranks share this many cores (ranks of one process on a small machine; the
  /// simulator's processor sharing). 0: every device computes on its own.
  double shared_cores = 0;
  /// The host CPUs next to the accelerators, on a heterogeneous cluster: where the planner
  /// may put the model's first layer (the embedding table) when that pays.
  struct host_side {
    int devices = 0;
    device_speed speed;
    double memory_bytes = 0;
    link_cost link;                                            // host <-> accelerator
    efficiency eff = efficiency{}.without_runtime_overhead();  // the host CPUs' own (not the accelerators')
  };
  std::optional<host_side> host;
};

/// The uniform view of a cluster: its accelerators if it has any, else its CPU devices; the
/// slowest device's speed and the smallest memory (a plan moves at its slowest rank's pace);
/// the slowest link inside a machine and the link between machines. `half_precision` takes
/// the f16 FLOP/s. Errors: a cluster without devices.
result<topology> topology_of(const cluster& c, bool half_precision = false);

}  // namespace cohort::planner
