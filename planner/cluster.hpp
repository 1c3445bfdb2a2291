// The unified cluster object (DESIGN.md §4): machines -> devices -> links, with what the cost
// model needs of each (FLOP/s per dtype, memory, memory bandwidth, link bandwidth and latency).
// Loaded from JSON in PaddlePaddle's auto-parallel cluster format or in cohort's own schema
// (docs/cluster.md), or built for this host by local_cluster(). Device ids are global ids.
//
//   result<planner::cluster> c = planner::load_cluster_file("configs/cluster_gpu_64.json");
//   if (!c) return c.error();   // "configs/cluster_gpu_64.json: machines[0].devices[0].memory_gb: ..."
//   planner::link_cost l = c->between(0, 8);          // 50e9 bytes/s, 5e-6 s: the inter link
//   bool near = c->same_machine(0, 7);                 // true
//   std::cout << c->summary();                         // one line per machine
//   // this host, for runs here:
//   auto here = planner::local_cluster(planner::detect_cores(), planner::detect_memory_bytes(),
//                                      /*flops_f32_per_core=*/50e9, /*memory_bandwidth=*/20e9);
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/error.hpp"

namespace cohort::planner {

enum class device_kind { cpu, gpu };

/// "cpu" or "gpu".
const char* to_string(device_kind k);

/// One place work can run: a GPU, or (in local_cluster) one CPU core.
struct device {
  int global_id = 0;  ///< unique in the cluster; what links and plans name
  int local_id = 0;   ///< index on its machine (CUDA ordinal for a GPU)
  int machine = 0;    ///< index into cluster::machines()
  device_kind kind = device_kind::cpu;
  std::string model;
  double flops_f32_per_s = 0;
  double flops_f16_per_s = 0;
  double flops_f64_per_s = 0;
  double memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  /// Its device profile (planner/device_profile.hpp) as the file names it, relative to the
  /// cluster file; empty: none named.
  std::string profile;
};

/// A directed link between two devices (by global id) that differs from the defaults.
struct link {
  int source = 0;
  int target = 0;
  std::string type;  ///< free text: Paddle's NVL/PHB/NET..., or "nvlink", "ib"...
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
  int hops = 0;  ///< switches crossed; defaults to 0 on one machine, 1 across machines
};

struct machine {
  std::string hostname, addr;
  int port = 0;
  std::vector<int> devices;  ///< global ids, in file order (filled by make_cluster)
};

/// What moving bytes from one device to another costs: time = latency_s + bytes / bandwidth.
struct link_cost {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};

/// Defaults for device pairs with no explicit link, when a cohort-schema file names none:
/// a PCIe 4.0 x16 class path inside a machine, 100 Gb/s Ethernet between machines.
inline constexpr link_cost default_intra_link{32e9, 5e-6};
inline constexpr link_cost default_inter_link{12.5e9, 20e-6};
/// A Paddle-format file has no defaults; Paddle's cost model uses 24 GB/s (Link.default_nic_bandwidth)
/// and latency 0 for any pair without a link, inside or across machines. So do we.
inline constexpr link_cost paddle_default_link{24e9, 0};
/// Paddle's format has no memory bandwidth: V100 HBM2 (Paddle's default GPU) and a two-socket
/// DDR4 server, until calibration measures it.
inline constexpr double paddle_gpu_memory_bandwidth_bytes_per_s = 900e9;
inline constexpr double paddle_cpu_memory_bandwidth_bytes_per_s = 100e9;

class cluster {
 public:
  cluster() = default;

  const std::vector<machine>& machines() const { return machines_; }
  const std::vector<device>& devices() const { return devices_; }
  const std::vector<link>& links() const { return links_; }

  /// The device with this global id, or nullptr.
  const device* find_device(int global_id) const;
  /// The device with this global id; an unknown id gives a device with global_id -1 and no capacity.
  const device& device_by_id(int global_id) const;
  /// Both ids exist and sit on one machine.
  bool same_machine(int a, int b) const;
  /// Cost of sending from a to b: the explicit link a -> b if there is one, else the
  /// machine's intra default (same machine) or the cluster's inter default. a == b: the
  /// device's memory bandwidth, latency 0. Unknown ids: the inter default.
  link_cost between(int a, int b) const;
  link_cost intra_link(int machine_index) const;
  link_cost inter_link() const { return inter_; }

  /// One line per machine: host, device groups with FLOP/s and memory, its links.
  std::string summary() const;
  /// The kind of device a plan runs on: its accelerators when it has any, else its CPUs (a
  /// heterogeneous cluster's CPUs are the host side).
  device_kind planned_kind() const;

 private:
  friend result<cluster> make_cluster(std::vector<machine>, std::vector<device>, std::vector<link>,
                                      std::vector<link_cost>, link_cost);
  std::vector<machine> machines_;
  std::vector<device> devices_;
  std::vector<link> links_;
  std::vector<link_cost> intra_;  // per machine
  link_cost inter_ = default_inter_link;
  std::unordered_map<int, std::size_t> device_index_;          // global id -> devices_ index
  std::unordered_map<std::uint64_t, std::size_t> link_index_;  // (source, target) -> links_ index
};

/// Builds a cluster, checking it: a default per machine, device::machine in range, unique
/// non-negative global ids, links between two different existing devices and no pair twice,
/// positive FLOP/s, memory and bandwidths, non-negative latencies. Fills machine::devices.
result<cluster> make_cluster(std::vector<machine> machines, std::vector<device> devices, std::vector<link> links,
                             std::vector<link_cost> intra_per_machine, link_cost inter);

/// Parses either format: cohort's schema when the top level has "cohort_cluster", else Paddle's.
/// `origin` starts every message ("cluster.json: machines[1].devices[3].sp_gflops: expected a
/// number, got \"fast\""); every error is errc::io_error.
result<cluster> load_cluster_json(const std::string& text, const std::string& origin);
/// Reads and parses a file; a missing file is errc::not_found naming the path.
result<cluster> load_cluster_file(const std::string& path);

/// This host: one machine, one CPU device per core, each with f32 FLOP/s as given (f16 the same,
/// f64 half) and a 1/cores share of the memory and memory bandwidth. Cores talk through shared
/// memory: half the memory bandwidth (a copy reads and writes), 1 us. cores < 1 counts as 1.
cluster local_cluster(int cores, double memory_bytes, double flops_f32_per_core, double memory_bandwidth_bytes_per_s);
/// Cores this process may run on (sched_getaffinity), at least 1.
int detect_cores();
/// Physical memory (/proc/meminfo MemTotal), 0 when it cannot be read.
double detect_memory_bytes();

}  // namespace cohort::planner
