// The cluster object: Paddle's auto-parallel cluster JSON as Paddle writes it, cohort's schema
// with "count", the default links between and inside machines, the example configs, this host.
#include <doctest/doctest.h>

#include "planner/cluster.hpp"
#include "planner/cluster_samples.hpp"

using namespace cohort;
using namespace cohort::planner;
using cohort::test::json;

TEST_CASE("a Paddle cluster file: 2 machines x 8 GPUs, links inside the machines") {
  auto c = load_cluster_json(test::paddle_2x8().dump(2), "cluster.json");
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  REQUIRE(c->machines().size() == 2);
  CHECK(c->machines()[1].hostname == "host_1");
  CHECK(c->machines()[1].addr == "10.0.0.2");
  CHECK(c->machines()[1].port == 60009);  // Paddle's tests write the port as a string
  // The NICs (ids 9 and 19) are link ends in Paddle, not devices: 8 GPUs and a CPU per machine.
  CHECK(c->devices().size() == 18);
  CHECK(c->machines()[1].devices == std::vector<int>{10, 11, 12, 13, 14, 15, 16, 17, 18});
  CHECK(c->find_device(9) == nullptr);
  const device& g = c->device_by_id(13);
  CHECK(g.kind == device_kind::gpu);
  CHECK(g.local_id == 3);
  CHECK(g.machine == 1);
  CHECK(g.model == "A100-SXM4-40GB");
  CHECK(g.flops_f32_per_s == 19500e9);
  CHECK(g.flops_f64_per_s == 9700e9);
  CHECK(g.flops_f16_per_s == 312000e9);
  CHECK(g.memory_bytes == 40e9);
  CHECK(g.memory_bandwidth_bytes_per_s == paddle_gpu_memory_bandwidth_bytes_per_s);
  const device& cpu = c->device_by_id(8);
  CHECK(cpu.kind == device_kind::cpu);
  CHECK(cpu.flops_f32_per_s == 150e9);  // "150": a string, as Paddle's float() reads it
  CHECK(cpu.flops_f16_per_s == 150e9);  // no hp_gflops: the f32 rate
  CHECK(cpu.memory_bytes == 502e9);
  // 56 NVLink + 8 GPU->CPU links per machine; the 8 GPU->NIC links per machine are dropped.
  CHECK(c->links().size() == 128);
  CHECK(c->links()[0].type == "NVL");
  CHECK(c->links()[0].hops == 0);
  CHECK(c->between(0, 1).bandwidth_bytes_per_s == 235e9);
  CHECK(c->between(0, 1).latency_s == 0);
  CHECK(c->between(0, 8).bandwidth_bytes_per_s == 24e9);
  CHECK(c->between(8, 0).bandwidth_bytes_per_s == paddle_default_link.bandwidth_bytes_per_s);  // no link back
  CHECK(c->between(0, 10).bandwidth_bytes_per_s == paddle_default_link.bandwidth_bytes_per_s);
  CHECK(c->same_machine(0, 7));
  CHECK_FALSE(c->same_machine(7, 10));
}

TEST_CASE("Paddle links may also sit at the top level, with latency in ms and a hop count") {
  json j = test::paddle_2x8();
  j["links"] = {{{"source_global_id", 3},
                 {"target_global_id", 12},
                 {"type", "NET"},
                 {"bandwidth", 25},
                 {"latency", 0.01},
                 {"hop", 2}},
                {{"source_global_id", 12}, {"target_global_id", 3}, {"type", "NET"}, {"bandwidth", 25}}};
  auto c = load_cluster_json(j.dump(), "cluster.json");
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  CHECK(c->links().size() == 130);
  CHECK(c->between(3, 12).bandwidth_bytes_per_s == 25e9);
  CHECK(c->between(3, 12).latency_s == doctest::Approx(10e-6));
  CHECK(c->links()[128].hops == 2);
  CHECK(c->links()[129].hops == 1);  // Paddle's default across machines
  CHECK(c->between(4, 12).bandwidth_bytes_per_s == paddle_default_link.bandwidth_bytes_per_s);
}

TEST_CASE("cohort's schema: count repeats machines and devices, ids in file order") {
  auto c = load_cluster_json(test::cohort_2x5().dump(), "mine.json");
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  REQUIRE(c->machines().size() == 2);
  CHECK(c->machines()[1].hostname == "node1");
  CHECK(c->machines()[1].addr == "10.1.0.1");
  CHECK(c->machines()[1].port == 7000);
  CHECK(c->machines()[1].devices == std::vector<int>{5, 6, 7, 8, 9});
  const device& g = c->device_by_id(7);
  CHECK(g.kind == device_kind::gpu);
  CHECK(g.local_id == 2);
  CHECK(g.flops_f16_per_s == 989e12);
  CHECK(g.flops_f64_per_s == 34e12);
  CHECK(g.memory_bytes == 80e9);
  CHECK(g.memory_bandwidth_bytes_per_s == 3350e9);
  const device& cpu = c->device_by_id(9);
  CHECK(cpu.kind == device_kind::cpu);
  CHECK(cpu.local_id == 4);
  CHECK(cpu.flops_f16_per_s == 4e12);  // f16 not given: the f32 rate
  CHECK(cpu.flops_f64_per_s == 2e12);  // f64 not given: half of it
  REQUIRE(c->links().size() == 1);
  CHECK(c->links()[0].hops == 1);
  CHECK(c->links()[0].type == "rail");
}

TEST_CASE("links between devices: explicit, the machine's intra default, the inter default") {
  auto c = load_cluster_json(test::cohort_2x5().dump(), "mine.json");
  REQUIRE(c.ok());
  CHECK(c->between(0, 5).bandwidth_bytes_per_s == 100e9);  // the explicit link
  CHECK(c->between(0, 5).latency_s == doctest::Approx(3e-6));
  CHECK(c->between(5, 0).bandwidth_bytes_per_s == 50e9);  // links are directed: back is the default
  CHECK(c->between(1, 6).bandwidth_bytes_per_s == 50e9);
  CHECK(c->between(1, 6).latency_s == doctest::Approx(5e-6));
  CHECK(c->between(1, 3).bandwidth_bytes_per_s == 450e9);
  CHECK(c->between(1, 3).latency_s == doctest::Approx(2e-6));
  CHECK(c->between(2, 2).bandwidth_bytes_per_s == 3350e9);  // within a device: its memory
  CHECK(c->between(2, 2).latency_s == 0);
  CHECK(c->between(2, 99).bandwidth_bytes_per_s == 50e9);  // unknown id: the inter default
  CHECK(c->device_by_id(99).global_id == -1);
  CHECK_FALSE(c->same_machine(2, 99));
  CHECK(c->intra_link(1).bandwidth_bytes_per_s == 450e9);
  CHECK(c->inter_link().bandwidth_bytes_per_s == 50e9);

  // Without intra_link / inter_link the documented defaults apply.
  json j = test::cohort_2x5();
  j.erase("inter_link");
  j["machines"][0].erase("intra_link");
  auto d = load_cluster_json(j.dump(), "mine.json");
  REQUIRE_MESSAGE(d.ok(), d.error().message);
  CHECK(d->between(1, 6).bandwidth_bytes_per_s == default_inter_link.bandwidth_bytes_per_s);
  CHECK(d->between(1, 6).latency_s == default_inter_link.latency_s);
  CHECK(d->between(1, 3).bandwidth_bytes_per_s == default_intra_link.bandwidth_bytes_per_s);
  CHECK(d->between(1, 3).latency_s == default_intra_link.latency_s);
}

TEST_CASE("summary: one line per machine") {
  auto c = load_cluster_json(test::cohort_2x5().dump(), "mine.json");
  REQUIRE(c.ok());
  CHECK(c->summary() ==
        "node0 (10.1.0.0:7000): 4 x gpu H100-SXM5-80GB [ids 0-3] 67 TFLOP/s f32, 989 TFLOP/s f16, 80 GB at 3.35 TB/s"
        " + 1 x cpu Xeon 8480 [ids 4] 4 TFLOP/s f32, 4 TFLOP/s f16, 1 TB at 300 GB/s; intra 450 GB/s 2 us;"
        " inter 50 GB/s 5 us\n"
        "node1 (10.1.0.1:7000): 4 x gpu H100-SXM5-80GB [ids 5-8] 67 TFLOP/s f32, 989 TFLOP/s f16, 80 GB at 3.35 TB/s"
        " + 1 x cpu Xeon 8480 [ids 9] 4 TFLOP/s f32, 4 TFLOP/s f16, 1 TB at 300 GB/s; intra 450 GB/s 2 us;"
        " inter 50 GB/s 5 us\n");
}

TEST_CASE("the example configs load") {
  auto paddle = load_cluster_file(COHORT_SOURCE_DIR "/configs/cluster_paddle_2x8.json");
  REQUIRE_MESSAGE(paddle.ok(), paddle.error().message);
  CHECK(paddle->machines().size() == 2);
  CHECK(paddle->devices().size() == 18);  // 16 GPUs and 2 CPUs; the NICs are not devices
  CHECK(paddle->between(0, 1).bandwidth_bytes_per_s == 235e9);
  CHECK(paddle->between(0, 10).bandwidth_bytes_per_s == 24e9);
  CHECK_FALSE(paddle->same_machine(0, 10));

  auto gpus = load_cluster_file(COHORT_SOURCE_DIR "/configs/cluster_gpu_64.json");
  REQUIRE_MESSAGE(gpus.ok(), gpus.error().message);
  CHECK(gpus->machines().size() == 8);
  CHECK(gpus->devices().size() == 64);
  CHECK(gpus->machines()[7].hostname == "gpu7");
  CHECK(gpus->machines()[7].devices.front() == 56);
  const device& g = gpus->device_by_id(63);
  CHECK(g.kind == device_kind::gpu);
  CHECK(g.local_id == 7);
  CHECK(g.memory_bytes == 80e9);
  CHECK(gpus->between(0, 7).bandwidth_bytes_per_s == 450e9);
  CHECK(gpus->between(7, 8).bandwidth_bytes_per_s == 50e9);  // 400 Gb/s
  CHECK(gpus->same_machine(56, 63));
}

TEST_CASE("a 4,096-device cluster from a short cohort file") {
  json j = test::cohort_2x5();
  j["machines"][0]["count"] = 512;
  j["machines"][0]["devices"] = {j["machines"][0]["devices"][0]};
  j["machines"][0]["devices"][0]["count"] = 8;
  j["links"] = {{{"source", 0}, {"target", 4095}, {"bandwidth_gb_per_s", 10}, {"latency_us", 9}}};
  auto c = load_cluster_json(j.dump(), "big.json");
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  CHECK(c->devices().size() == 4096);
  CHECK(c->machines()[511].hostname == "node511");
  CHECK(c->device_by_id(4095).machine == 511);
  CHECK(c->between(0, 4095).bandwidth_bytes_per_s == 10e9);
}

TEST_CASE("this host: one CPU device per core over shared memory") {
  cluster c = local_cluster(4, 16e9, 50e9, 20e9);
  REQUIRE(c.machines().size() == 1);
  REQUIRE(c.devices().size() == 4);
  CHECK(c.devices()[3].kind == device_kind::cpu);
  CHECK(c.devices()[3].flops_f32_per_s == 50e9);
  CHECK(c.devices()[3].memory_bytes == 4e9);
  CHECK(c.devices()[3].memory_bandwidth_bytes_per_s == 5e9);
  CHECK(c.between(0, 3).bandwidth_bytes_per_s == 10e9);
  CHECK(c.same_machine(0, 3));
  CHECK(local_cluster(0, 0, 0, 0).devices().size() == 1);  // failed detection still gives a cluster
  CHECK(detect_cores() >= 1);
  CHECK(detect_memory_bytes() > 0);
  cluster here = local_cluster(detect_cores(), detect_memory_bytes(), 50e9, 20e9);
  CHECK(static_cast<int>(here.devices().size()) == detect_cores());
}

TEST_CASE("make_cluster checks clusters built in code") {
  std::vector<machine> ms{{"a", "", 0, {}}};
  device d{0, 0, 0, device_kind::gpu, "g", 1, 1, 1, 1, 1, ""};
  auto ok = make_cluster(ms, {d}, {}, {default_intra_link}, default_inter_link);
  CHECK(ok.ok());
  CHECK(make_cluster(ms, {d, d}, {}, {default_intra_link}, default_inter_link).error().message ==
        "cluster: devices[1].global_id: 0 is already used by devices[0]");
  CHECK(make_cluster(ms, {d}, {{0, 3, "x", 1, 0, 0}}, {default_intra_link}, default_inter_link).error().message ==
        "cluster: links[0].target: no device 3");
  CHECK(make_cluster(ms, {d}, {}, {}, default_inter_link).error().message ==
        "cluster: 1 machines but 0 intra-machine links");
}
