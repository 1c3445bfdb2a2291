// Cluster files for the planner tests, built as JSON values so a test can break one field.
//
//   json j = paddle_2x8();
//   j["machines"][1]["devices"][3]["sp_gflops"] = "fast";
//   auto c = planner::load_cluster_json(j.dump(), "cluster.json");
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace cohort::test {

using json = nlohmann::json;

// Two machines of 8 A100s in the shape Paddle writes (static/cluster.py and its tests): global
// ids 0-7 GPUs, 8 the CPU, 9 the NIC on host_0, then 10-19 on host_1; links inside each machine
// (NVLink between GPUs, PCIe to the CPU and NIC), none between machines; the quirks of Paddle's
// own files: port and the CPU's numbers as strings, the NIC's local_id "NIC", extra keys.
inline json paddle_2x8() {
  json machines = json::array();
  int gid = 0;
  for (int m = 0; m < 2; ++m) {
    json devices = json::array(), links = json::array();
    int first = gid;
    for (int g = 0; g < 8; ++g)
      devices.push_back({{"global_id", gid++},
                         {"local_id", g},
                         {"type", "GPU"},
                         {"model", "A100-SXM4-40GB"},
                         {"sp_gflops", 19500},
                         {"dp_gflops", 9700},
                         {"hp_gflops", 312000},
                         {"memory", 40}});
    int cpu = gid++, nic = gid++;
    devices.push_back({{"global_id", cpu},
                       {"local_id", 0},
                       {"type", "CPU"},
                       {"arch", "x86_64"},
                       {"vendor", "GenuineIntel"},
                       {"model", "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GH"},
                       {"sp_gflops", "150"},
                       {"dp_gflops", "75"},
                       {"memory", "502"}});
    devices.push_back(
        {{"global_id", nic}, {"local_id", "NIC"}, {"type", "NIC"}, {"width", 12.5}, {"ip", "10.127.9.147"}});
    for (int s = first; s < first + 8; ++s) {
      for (int t = first; t < first + 8; ++t)
        if (s != t)
          links.push_back({{"source_global_id", s}, {"target_global_id", t}, {"type", "NVL"}, {"bandwidth", 235.0}});
      links.push_back({{"source_global_id", s}, {"target_global_id", cpu}, {"type", "PHB"}, {"bandwidth", 24.0}});
      links.push_back({{"source_global_id", s}, {"target_global_id", nic}, {"type", "PHB"}, {"bandwidth", 24.0}});
    }
    machines.push_back({{"hostname", "host_" + std::to_string(m)},
                        {"addr", "10.0.0." + std::to_string(m + 1)},
                        {"port", "60009"},
                        {"devices", devices},
                        {"links", links}});
  }
  json alpha = {{"inter", {{"ring", "NET"}, {"tree", "NET"}}},
                {"intra", {{"ring", "NVL"}, {"tree", "PHB"}}},
                {"base", {{"ring", 8.4}, {"tree", 0}}},
                {"switch", 10.0}};
  return {{"alpha_latency", alpha}, {"machines", machines}};
}

// Cohort's schema: 2 machines ("node0", "node1") of 4 GPUs and 1 CPU, one explicit link.
inline json cohort_2x5() {
  return json::parse(R"({
    "cohort_cluster": 1,
    "inter_link": {"type": "ib", "bandwidth_gb_per_s": 50, "latency_us": 5},
    "machines": [
      {"hostname": "node{i}", "addr": "10.1.0.{i}", "port": 7000, "count": 2,
       "intra_link": {"type": "nvlink", "bandwidth_gb_per_s": 450, "latency_us": 2},
       "devices": [
         {"kind": "gpu", "model": "H100-SXM5-80GB", "count": 4,
          "tflops": {"f32": 67, "f16": 989, "f64": 34}, "memory_gb": 80, "memory_bandwidth_gb_per_s": 3350},
         {"kind": "cpu", "model": "Xeon 8480", "tflops": {"f32": 4},
          "memory_gb": 1000, "memory_bandwidth_gb_per_s": 300}]}
    ],
    "links": [{"source": 0, "target": 5, "type": "rail", "bandwidth_gb_per_s": 100, "latency_us": 3}]
  })");
}

}  // namespace cohort::test
