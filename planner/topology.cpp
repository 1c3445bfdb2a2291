// The uniform view of a cluster the planner prices plans on (planner/topology.hpp).
#include "planner/topology.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

namespace cohort::planner {

result<topology> topology_of(const cluster& c, bool half_precision) {
  const device_kind planned = c.planned_kind();
  const bool any_gpu = planned == device_kind::gpu;
  topology t;
  t.devices = 0;
  t.devices_per_machine = 0;
  double flops = std::numeric_limits<double>::infinity(), memory = flops, bandwidth = flops;
  std::map<int, int> per_machine;
  for (const device& d : c.devices()) {
    if (d.kind != planned) continue;
    ++t.devices;
    t.devices_per_machine = std::max(t.devices_per_machine, ++per_machine[d.machine]);
    flops = std::min(flops, half_precision ? d.flops_f16_per_s : d.flops_f32_per_s);
    memory = std::min(memory, d.memory_bytes);
    bandwidth = std::min(bandwidth, d.memory_bandwidth_bytes_per_s);
  }
  if (t.devices == 0) return make_error(errc::invalid_argument, "the cluster has no devices to plan for");
  t.speed = {flops, bandwidth};
  t.memory_bytes = memory;
  link_cost intra{std::numeric_limits<double>::infinity(), 0};
  for (std::size_t m = 0; m < c.machines().size(); ++m) {
    link_cost l = c.intra_link(static_cast<int>(m));
    std::vector<int> ids;  // the machine's devices of the kind planned for
    for (int id : c.machines()[m].devices)
      if (c.device_by_id(id).kind == planned) ids.push_back(id);
    for (std::size_t i = 0; i + 1 < ids.size() && i < 64; ++i) {  // explicit links between neighbours
      link_cost e = c.between(ids[i], ids[i + 1]);
      if (e.bandwidth_bytes_per_s < l.bandwidth_bytes_per_s) l = e;
    }
    if (l.bandwidth_bytes_per_s < intra.bandwidth_bytes_per_s) intra = l;
    intra.latency_s = std::max(intra.latency_s, l.latency_s);
  }
  t.intra = intra;
  // a heterogeneous cluster: its CPU devices are the host side
  if (any_gpu) {
    topology::host_side host;
    double host_flops = std::numeric_limits<double>::infinity(), host_memory = host_flops, host_bandwidth = host_flops;
    int a_cpu = -1, a_gpu = -1;
    for (const device& d : c.devices()) {
      if (d.kind == device_kind::gpu) continue;
      ++host.devices;
      if (a_cpu < 0) a_cpu = d.global_id;
      host_flops = std::min(host_flops, half_precision ? d.flops_f16_per_s : d.flops_f32_per_s);
      host_memory = std::min(host_memory, d.memory_bytes);
      host_bandwidth = std::min(host_bandwidth, d.memory_bandwidth_bytes_per_s);
    }
    for (const device& d : c.devices())  // an accelerator next to the first CPU, else any
      if (d.kind == device_kind::gpu && (a_gpu < 0 || c.same_machine(a_cpu, d.global_id)) &&
          !(a_gpu >= 0 && c.same_machine(a_cpu, a_gpu)))
        a_gpu = d.global_id;
    if (host.devices > 0) {
      host.speed = {host_flops, host_bandwidth};
      host.memory_bytes = host_memory;
      host.link = c.between(a_cpu, a_gpu);
      t.host = host;
    }
  }
  t.inter = c.machines().size() > 1 ? c.inter_link() : t.intra;
  return t;
}

}  // namespace cohort::planner
