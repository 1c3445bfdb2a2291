// Every kind of bad cluster file: the error is a value (errc::invalid_argument: bad input, exit code 2; not_found for a
// missing file) whose message names the origin and the JSON path of the bad field.
#include <doctest/doctest.h>

#include <functional>

#include "planner/cluster.hpp"
#include "planner/cluster_samples.hpp"

using namespace cohort;
using namespace cohort::planner;
using cohort::test::json;

namespace {

// The message of loading `j` after `edit`, or "" when it loads.
std::string error_of(json j, const std::function<void(json&)>& edit) {
  edit(j);
  auto c = load_cluster_json(j.dump(), "cluster.json");
  if (c.ok()) return "";
  CHECK(c.error().code == errc::invalid_argument);
  return c.error().message;
}
std::string paddle_error(const std::function<void(json&)>& edit) { return error_of(test::paddle_2x8(), edit); }
std::string cohort_error(const std::function<void(json&)>& edit) { return error_of(test::cohort_2x5(), edit); }

}  // namespace

TEST_CASE("Paddle format: wrong-typed fields") {
  CHECK(paddle_error([](json& j) { j["machines"][1]["devices"][3]["sp_gflops"] = "fast"; }) ==
        "cluster.json: machines[1].devices[3].sp_gflops: expected a number, got \"fast\"");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][2]["memory"] = true; }) ==
        "cluster.json: machines[0].devices[2].memory: expected a number, got true");
  CHECK(paddle_error([](json& j) { j["machines"][0]["hostname"] = 5; }) ==
        "cluster.json: machines[0].hostname: expected a string, got 5");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][1]["global_id"] = 1.5; }) ==
        "cluster.json: machines[0].devices[1].global_id: expected an integer, got 1.5");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][1]["type"] = "TPU"; }) ==
        "cluster.json: machines[0].devices[1].type: expected one of \"GPU\", \"XPU\", \"DCU\", \"CPU\", \"NIC\", got "
        "\"TPU\"");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"] = json::object(); }) ==
        "cluster.json: machines[0].devices: expected an array, got {}");
  CHECK(paddle_error([](json& j) { j["machines"][1] = 3; }) == "cluster.json: machines[1]: expected an object, got 3");
  CHECK(paddle_error([](json& j) { j["machines"][1]["links"][4] = "0->1"; }) ==
        "cluster.json: machines[1].links[4]: expected an object, got \"0->1\"");
  CHECK(paddle_error([](json& j) {
          j["machines"][1]["links"][4]["bandwidth"] = json::array({1, 2});
        }) == "cluster.json: machines[1].links[4].bandwidth: expected a number, got [1,2]");
}

TEST_CASE("Paddle format: missing fields") {
  CHECK(paddle_error([](json& j) { j.erase("machines"); }) == "cluster.json: machines: missing, expected an array");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][0].erase("memory"); }) ==
        "cluster.json: machines[0].devices[0].memory: missing, expected a number > 0");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][0].erase("local_id"); }) ==
        "cluster.json: machines[0].devices[0].local_id: missing, expected an integer");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][0].erase("model"); }) ==
        "cluster.json: machines[0].devices[0].model: missing, expected a string");
  CHECK(paddle_error([](json& j) { j["machines"][1]["links"][0].erase("target_global_id"); }) ==
        "cluster.json: machines[1].links[0].target_global_id: missing, expected an integer");
}

TEST_CASE("Paddle format: values out of range") {
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][5]["dp_gflops"] = 0; }) ==
        "cluster.json: machines[0].devices[5].dp_gflops: expected a number > 0, got 0");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][8]["memory"] = "-1"; }) ==
        "cluster.json: machines[0].devices[8].memory: expected a number > 0, got \"-1\"");
  CHECK(paddle_error([](json& j) { j["machines"][0]["links"][2]["bandwidth"] = -3; }) ==
        "cluster.json: machines[0].links[2].bandwidth: expected a number > 0, got -3");
  CHECK(paddle_error([](json& j) { j["machines"][0]["links"][2]["latency"] = -0.5; }) ==
        "cluster.json: machines[0].links[2].latency: expected a number >= 0, got -0.5");
  CHECK(paddle_error([](json& j) { j["machines"][0]["devices"][1]["global_id"] = -1; }) ==
        "cluster.json: machines[0].devices[1].global_id: expected an integer >= 0, got -1");
  CHECK(paddle_error([](json& j) { j["machines"][0]["port"] = 70000; }) ==
        "cluster.json: machines[0].port: expected an integer from 0 to 65535, got 70000");
}

TEST_CASE("Paddle format: ids and links that do not fit together") {
  CHECK(paddle_error([](json& j) { j["machines"][1]["devices"][0]["global_id"] = 3; }) ==
        "cluster.json: machines[1].devices[0].global_id: 3 is already used by machines[0].devices[3]");
  CHECK(paddle_error([](json& j) { j["machines"][0]["links"][1]["target_global_id"] = 99; }) ==
        "cluster.json: machines[0].links[1].target_global_id: no device 99");
  CHECK(paddle_error([](json& j) {
          j["links"] = {{{"source_global_id", 42}, {"target_global_id", 0}, {"type", "NET"}, {"bandwidth", 1}}};
        }) == "cluster.json: links[0].source_global_id: no device 42");
  CHECK(paddle_error([](json& j) { j["machines"][0]["links"][1]["target_global_id"] = 0; }) ==
        "cluster.json: machines[0].links[1]: a link from device 0 to itself");
  CHECK(paddle_error([](json& j) { j["links"] = {j["machines"][1]["links"][3]}; }) ==
        "cluster.json: links[0]: the link 10 -> 14 is already given at machines[1].links[3]");
  CHECK(paddle_error([](json& j) {
          for (json& m : j["machines"]) {
            m["devices"] = {m["devices"][9]};
            m["links"] = json::array();
          }
        }) == "cluster.json: machines: no CPU or GPU devices");
}

TEST_CASE("cohort schema: unknown keys, wrong types, bad values") {
  CHECK(cohort_error([](json& j) { j["machines"][0]["devices"][0]["memroy_gb"] = 80; }) ==
        "cluster.json: machines[0].devices[0].memroy_gb: unknown key (expected kind, model, count, tflops, memory_gb, "
        "memory_bandwidth_gb_per_s, profile or comment)");
  CHECK(cohort_error([](json& j) { j["interlink"] = 1; }) ==
        "cluster.json: interlink: unknown key (expected cohort_cluster, machines, inter_link, links or comment)");
  CHECK(cohort_error([](json& j) { j["cohort_cluster"] = 2; }) ==
        "cluster.json: cohort_cluster: version 2 is not supported (this build reads 1)");
  CHECK(cohort_error([](json& j) { j["machines"][0]["devices"][0]["memory_gb"] = "80"; }) ==
        "cluster.json: machines[0].devices[0].memory_gb: expected a number, got \"80\"");  // strict: no strings
  CHECK(cohort_error([](json& j) { j["machines"][0]["devices"][1]["kind"] = "tpu"; }) ==
        "cluster.json: machines[0].devices[1].kind: expected one of \"cpu\", \"gpu\", got \"tpu\"");
  CHECK(cohort_error([](json& j) { j["machines"][0]["devices"][0]["count"] = 0; }) ==
        "cluster.json: machines[0].devices[0].count: expected an integer from 1 to 1048576, got 0");
  CHECK(cohort_error([](json& j) { j["machines"][0]["devices"][0].erase("tflops"); }) ==
        "cluster.json: machines[0].devices[0].tflops: missing, expected an object");
  CHECK(cohort_error([](json& j) { j["machines"][0]["devices"][0]["tflops"]["f16"] = 0; }) ==
        "cluster.json: machines[0].devices[0].tflops.f16: expected a number > 0, got 0");
  CHECK(cohort_error([](json& j) { j["machines"][0]["intra_link"].erase("latency_us"); }) ==
        "cluster.json: machines[0].intra_link.latency_us: missing, expected a number >= 0");
  CHECK(cohort_error([](json& j) { j["inter_link"]["bandwidth_gb_per_s"] = 0; }) ==
        "cluster.json: inter_link.bandwidth_gb_per_s: expected a number > 0, got 0");
  CHECK(cohort_error([](json& j) { j["links"][0]["target"] = 10; }) == "cluster.json: links[0].target: no device 10");
  CHECK(cohort_error([](json& j) { j["links"][0]["hops"] = -2; }) ==
        "cluster.json: links[0].hops: expected an integer >= 0, got -2");
  CHECK(cohort_error([](json& j) { j["machines"][0]["count"] = 1000000; }) ==
        "cluster.json: machines[0]: the cluster would have more than 1048576 devices");
  CHECK(cohort_error([](json& j) { j["machines"][0]["comment"] = "fine"; }).empty());
}

TEST_CASE("not JSON, not an object, no file") {
  auto bad = load_cluster_json("{\"machines\": [1,}", "cluster.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == errc::invalid_argument);
  CHECK(bad.error().message.rfind("cluster.json: not valid JSON: parse error at line 1, column 17:", 0) == 0);
  CHECK(load_cluster_json("", "empty.json").error().message.rfind("empty.json: not valid JSON: ", 0) == 0);
  CHECK(load_cluster_json("[1, 2]", "cluster.json").error().message ==
        "cluster.json: expected a JSON object at the top level, got [1,2]");
  auto missing = load_cluster_file("/nonexistent/cluster.json");
  CHECK(missing.error().code == errc::not_found);
  CHECK(missing.error().message == "/nonexistent/cluster.json: no such file");
}
