// The cluster object: construction and checks, link lookup, the summary, and the cluster of
// this host. Reading the JSON formats is in cluster_json.cpp.
#include "planner/cluster.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

namespace cohort::planner {

namespace {

std::uint64_t pair_key(int a, int b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// 67e12, "FLOP/s" -> "67 TFLOP/s"
std::string scaled(double v, const char* unit) {
  static const char* const prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int p = 0;
  while (p < 6 && std::abs(v) >= 1000) v /= 1000, ++p;
  char b[64];
  std::snprintf(b, sizeof b, "%.4g %s%s", v, prefixes[p], unit);
  return b;
}

std::string seconds(double s) {
  char b[64];
  if (s > 0 && s < 1e-3)
    std::snprintf(b, sizeof b, "%.4g us", s * 1e6);
  else if (s > 0 && s < 1)
    std::snprintf(b, sizeof b, "%.4g ms", s * 1e3);
  else
    std::snprintf(b, sizeof b, "%.4g s", s);
  return b;
}

bool alike(const device& a, const device& b) {
  return a.kind == b.kind && a.model == b.model && a.flops_f32_per_s == b.flops_f32_per_s &&
         a.flops_f16_per_s == b.flops_f16_per_s && a.memory_bytes == b.memory_bytes &&
         a.memory_bandwidth_bytes_per_s == b.memory_bandwidth_bytes_per_s;
}

const device no_device{-1, -1, -1, device_kind::cpu, "", 0, 0, 0, 0, 0, ""};

}  // namespace

const char* to_string(device_kind k) { return k == device_kind::gpu ? "gpu" : "cpu"; }

// ---------------------------------------------------------------------------------------------
// The cluster

device_kind cluster::planned_kind() const {
  for (const device& d : devices_)
    if (d.kind == device_kind::gpu) return device_kind::gpu;
  return device_kind::cpu;
}

const device* cluster::find_device(int global_id) const {
  auto it = device_index_.find(global_id);
  return it == device_index_.end() ? nullptr : &devices_[it->second];
}

const device& cluster::device_by_id(int global_id) const {
  const device* d = find_device(global_id);
  return d ? *d : no_device;
}

bool cluster::same_machine(int a, int b) const {
  const device *da = find_device(a), *db = find_device(b);
  return da && db && da->machine == db->machine;
}

link_cost cluster::intra_link(int machine_index) const {
  if (machine_index < 0 || static_cast<std::size_t>(machine_index) >= intra_.size()) return inter_;
  return intra_[static_cast<std::size_t>(machine_index)];
}

link_cost cluster::between(int a, int b) const {
  const device *da = find_device(a), *db = find_device(b);
  if (!da || !db) return inter_;
  if (a == b) return {da->memory_bandwidth_bytes_per_s, 0};
  if (auto it = link_index_.find(pair_key(a, b)); it != link_index_.end())
    return {links_[it->second].bandwidth_bytes_per_s, links_[it->second].latency_s};
  return da->machine == db->machine ? intra_link(da->machine) : inter_;
}

std::string cluster::summary() const {
  std::string out;
  for (std::size_t mi = 0; mi < machines_.size(); ++mi) {
    const machine& m = machines_[mi];
    out += m.hostname + (m.addr.empty() ? "" : " (" + m.addr + ":" + std::to_string(m.port) + ")") + ":";
    const std::vector<int>& ids = m.devices;
    if (ids.empty()) out += " no devices";
    for (std::size_t i = 0, j = 0; i < ids.size(); i = j) {
      const device& d = device_by_id(ids[i]);
      bool contiguous = true;
      for (j = i + 1; j < ids.size() && alike(device_by_id(ids[j]), d); ++j) contiguous &= ids[j] == ids[j - 1] + 1;
      std::string id_text = std::to_string(ids[i]);
      for (std::size_t k = i + 1; k < j && !contiguous; ++k) id_text += "," + std::to_string(ids[k]);
      if (contiguous && j - i > 1) id_text += "-" + std::to_string(ids[j - 1]);
      out += std::string(i ? " +" : "") + " " + std::to_string(j - i) + " x " + to_string(d.kind) + " " + d.model +
             " [ids " + id_text + "] " + scaled(d.flops_f32_per_s, "FLOP/s") + " f32, " +
             scaled(d.flops_f16_per_s, "FLOP/s") + " f16, " + scaled(d.memory_bytes, "B") + " at " +
             scaled(d.memory_bandwidth_bytes_per_s, "B/s");
    }
    link_cost in = intra_link(static_cast<int>(mi));
    out += "; intra " + scaled(in.bandwidth_bytes_per_s, "B/s") + " " + seconds(in.latency_s) + "; inter " +
           scaled(inter_.bandwidth_bytes_per_s, "B/s") + " " + seconds(inter_.latency_s) + "\n";
  }
  return out;
}

result<cluster> make_cluster(std::vector<machine> machines, std::vector<device> devices, std::vector<link> links,
                             std::vector<link_cost> intra, link_cost inter) {
  auto bad = [](const std::string& m) { return make_error(errc::invalid_argument, "cluster: " + m); };
  auto bad_cost = [](link_cost c) { return !(c.bandwidth_bytes_per_s > 0) || !(c.latency_s >= 0); };
  if (intra.size() != machines.size())
    return bad(std::to_string(machines.size()) + " machines but " + std::to_string(intra.size()) +
               " intra-machine links");
  for (std::size_t i = 0; i < intra.size(); ++i)
    if (bad_cost(intra[i]))
      return bad("machines[" + std::to_string(i) + "]: intra link needs bandwidth > 0, latency >= 0");
  if (bad_cost(inter)) return bad("inter link needs bandwidth > 0, latency >= 0");
  cluster c;
  for (machine& m : machines) m.devices.clear();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const device& d = devices[i];
    std::string at = "devices[" + std::to_string(i) + "]";
    if (d.machine < 0 || static_cast<std::size_t>(d.machine) >= machines.size())
      return bad(at + ".machine: no machine " + std::to_string(d.machine));
    if (d.global_id < 0) return bad(at + ".global_id: expected >= 0, got " + std::to_string(d.global_id));
    if (!(d.flops_f32_per_s > 0 && d.flops_f16_per_s > 0 && d.flops_f64_per_s > 0 && d.memory_bytes > 0 &&
          d.memory_bandwidth_bytes_per_s > 0))
      return bad(at + ": FLOP/s, memory and memory bandwidth must be > 0");
    auto [it, fresh] = c.device_index_.emplace(d.global_id, i);
    if (!fresh)
      return bad(at + ".global_id: " + std::to_string(d.global_id) + " is already used by devices[" +
                 std::to_string(it->second) + "]");
    machines[static_cast<std::size_t>(d.machine)].devices.push_back(d.global_id);
  }
  for (std::size_t i = 0; i < links.size(); ++i) {
    const link& l = links[i];
    std::string at = "links[" + std::to_string(i) + "]";
    if (!c.device_index_.count(l.source)) return bad(at + ".source: no device " + std::to_string(l.source));
    if (!c.device_index_.count(l.target)) return bad(at + ".target: no device " + std::to_string(l.target));
    if (l.source == l.target) return bad(at + ": a link from device " + std::to_string(l.source) + " to itself");
    if (bad_cost({l.bandwidth_bytes_per_s, l.latency_s}) || l.hops < 0)
      return bad(at + ": needs bandwidth > 0, latency >= 0, hops >= 0");
    auto [it, fresh] = c.link_index_.emplace(pair_key(l.source, l.target), i);
    if (!fresh)
      return bad(at + ": the link " + std::to_string(l.source) + " -> " + std::to_string(l.target) +
                 " is already links[" + std::to_string(it->second) + "]");
  }
  c.machines_ = std::move(machines);
  c.devices_ = std::move(devices);
  c.links_ = std::move(links);
  c.intra_ = std::move(intra);
  c.inter_ = inter;
  return c;
}

// ---------------------------------------------------------------------------------------------
// This host

cluster local_cluster(int cores, double memory_bytes, double flops_f32_per_core, double memory_bandwidth_bytes_per_s) {
  // Values <= 0 (detection failed) count as 1 so the cluster stays well-formed; the summary shows them.
  auto positive = [](double v) { return v > 0 ? v : 1.0; };
  cores = std::max(cores, 1);
  double flops = positive(flops_f32_per_core), bandwidth = positive(memory_bandwidth_bytes_per_s);
  std::vector<device> devices;
  for (int i = 0; i < cores; ++i)
    devices.push_back({i, i, 0, device_kind::cpu, "cpu-core", flops, flops, flops / 2, positive(memory_bytes) / cores,
                       bandwidth / cores, ""});
  auto c = make_cluster({{"localhost", "127.0.0.1", 0, {}}}, std::move(devices), {}, {{bandwidth / 2, 1e-6}},
                        default_inter_link);
  return c ? std::move(*c) : cluster{};  // cannot fail: every value above is positive
}

int detect_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

double detect_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  double kib = 0;
  for (std::string line; std::getline(in, line);)
    if (std::sscanf(line.c_str(), "MemTotal: %lf kB", &kib) == 1 && kib > 0) return kib * 1024;
  long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_bytes > 0 ? static_cast<double>(pages) * static_cast<double>(page_bytes) : 0;
}

}  // namespace cohort::planner
