// Checkpoints written under one plan and loaded under another: every element of every
// parameter and optimizer slot lands where the new plan keeps it (pieces filled with codes,
// test/support/coded_pieces.hpp), from one process's file or from several; the directory is
// written atomically, pruned to the newest `keep`, and a failed write leaves the previous
// checkpoint as it was; every kind of bad checkpoint is refused naming the file and the fault,
// and finding the newest falls back past the ones refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "actors/checkpoint_store.hpp"
#include "apps/models/gpt.hpp"
#include "apps/models/mlp.hpp"
#include "planner/rank_layout.hpp"
#include "support/coded_pieces.hpp"
#include "support/run_files.hpp"

using namespace cohort;
using namespace cohort::actors;
namespace ck = cohort::actors::checkpoint;
namespace fs = std::filesystem;
using planner::parallel_plan;

namespace {

const model_fn mlp = [](graph& g, std::int64_t b) { return apps::build_mlp(g, {24, 36, 30, 10}, b).loss; };
const model_fn gpt = [](graph& g, std::int64_t b) {
  return apps::build_gpt(g, {.layers = 2, .d = 24, .heads = 3, .seq = 8, .vocab = 256}, b).loss;
};

std::vector<piece_layout> layouts_of(const model_fn& m, const parallel_plan& p) {
  auto cm = compile(m, p, 8);
  REQUIRE_MESSAGE(cm.ok(), cm.error().message);
  auto l = piece_layouts(*cm);
  REQUIRE(l.ok());
  return *l;
}

std::string fresh_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("cohort-ck-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

const optimizer_config adamw = adamw_config{};  // two slots: adam_m, adam_v

// `layouts` with coded pieces written as checkpoint `step` by `processes` processes into `dir`.
ck::contents coded_contents(const std::vector<piece_layout>& layouts, const parallel_plan& plan, int processes,
                            std::int64_t step) {
  ck::contents c;
  c.step = step;
  c.plan = plan;
  c.layouts = layouts;
  c.owner = planner::rank_layout(plan).process_of_rank(processes);
  c.processes = processes;
  c.states = cohort::test::coded_states(layouts, 2);
  for (auto& s : c.states) s.steps = step;
  c.optimizer = adamw;
  return c;
}

std::string save(const std::string& dir, const ck::contents& c) {
  ck::store_settings s;
  s.dir = dir;
  s.timeout = std::chrono::milliseconds(5000);
  for (int p = c.processes - 1; p >= 0; --p) {  // the others' files first: the first process waits for them
    auto w = ck::save(s, c, p);
    REQUIRE_MESSAGE(w.ok(), w.error().message);
  }
  return dir + "/" + ck::step_dir_name(c.step);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string refusal(const std::string& dir) {
  auto o = ck::open(dir);
  REQUIRE_FALSE(o.ok());
  return o.error().message;
}

}  // namespace

TEST_CASE("boxes cover exactly the runs of a piece") {
  const shape whole{4, 6};
  // a tensor-parallel shard: columns 0-2 of every row, one box
  auto cols = ck::boxes_of(whole, box_runs(whole, {{0, 4}, {0, 3}}));
  REQUIRE(cols.size() == 1);
  CHECK(cols[0] == ck::box{{0, 0}, {4, 3}});
  // a ZeRO range across rows: elements 5..16 -> (0,5) 1x1, rows 1 whole, (2,0) 1x5
  auto range = ck::boxes_of(whole, {{5, 17}});
  REQUIRE(range.size() == 3);
  CHECK(range[0] == ck::box{{0, 5}, {1, 1}});
  CHECK(range[1] == ck::box{{1, 0}, {1, 6}});
  CHECK(range[2] == ck::box{{2, 0}, {1, 5}});
  // a 3-d tensor's whole shard along its first dimension merges into one box
  const shape cube{4, 3, 5};
  auto half = ck::boxes_of(cube, box_runs(cube, {{2, 4}, {0, 3}, {0, 5}}));
  REQUIRE(half.size() == 1);
  CHECK(half[0] == ck::box{{2, 0, 0}, {2, 3, 5}});
  CHECK(ck::boxes_of(shape{}, {{0, 1}}).size() == 1);  // a scalar
}

TEST_CASE("a checkpoint written under one plan loads into another with every element in place") {
  struct pair_case {
    const char* name;
    parallel_plan from, to;
    int writers, readers;
  };
  const std::vector<pair_case> cases = {
      {"dp2 sharded -> tp2 pp2 m4", {.dp = 2, .shard_params = true}, {.tp = 2, .pp = 2, .micro_batches = 4}, 1, 1},
      {"dp2 sharded over 2 processes -> tp2 pp2 in 1",
       {.dp = 2, .shard_params = true},
       {.tp = 2, .pp = 2, .micro_batches = 4},
       2,
       1},
      {"tp2 pp2 in 1 -> dp4 over 4 processes", {.tp = 2, .pp = 2, .micro_batches = 4}, {.dp = 4}, 1, 4},
      {"tp3 -> dp2 tp2 sharded over 2", {.tp = 3}, {.dp = 2, .tp = 2, .shard_params = true}, 1, 2},
      {"dp2 tp2 pp2 m2 over 2 -> serial", {.dp = 2, .tp = 2, .pp = 2, .micro_batches = 2}, {}, 2, 1},
  };
  for (const auto* m : {&mlp, &gpt})
    for (const auto& c : cases) {
      const std::string pair = c.name;
      CAPTURE(pair);
      const auto from = layouts_of(*m, c.from);
      const auto to = layouts_of(*m, c.to);
      const std::string path = save(fresh_dir("layouts"), coded_contents(from, c.from, c.writers, 7));
      auto opened = ck::open(path);
      REQUIRE_MESSAGE(opened.ok(), opened.error().message);
      CHECK(opened->step == 7);
      REQUIRE(ck::check_compatible(*opened, to, adamw).ok());
      // each reading process fills its own ranks only
      const auto owner = planner::rank_layout(c.to).process_of_rank(c.readers);
      for (int p = 0; p < c.readers; ++p) {
        std::vector<bool> local;
        for (int o : owner) local.push_back(o == p);
        auto pieces = ck::load_pieces(*opened, to, local, 2);
        REQUIRE_MESSAGE(pieces.ok(), pieces.error().message);
        for (std::size_t r = 0; r < to.size(); ++r) CHECK(pieces->at(r).values.defined() == local[r]);
        cohort::test::check_coded(to, *pieces, 2);
        for (std::size_t r = 0; r < to.size(); ++r)
          if (local[r]) CHECK(pieces->at(r).steps == 7);
      }
      // each element stored once: the files hold one copy of every parameter and slot
      std::uint64_t stored = 0, whole = 0;
      for (const auto& [name, h] : opened->headers)
        for (const auto& e : h.tensors) stored += e.end - e.begin;
      for (const auto& [name, s] : opened->params) whole += static_cast<std::uint64_t>(s.numel()) * 4 * 3;
      CHECK(stored == whole);
    }
}

TEST_CASE("the directory keeps the newest checkpoints and points latest at the newest") {
  const std::string dir = fresh_dir("keep");
  const parallel_plan plan{.dp = 2};
  const auto layouts = layouts_of(mlp, plan);
  ck::store_settings s;
  s.dir = dir;
  s.keep = 2;
  for (std::int64_t step : {10, 20, 30, 40}) REQUIRE(ck::save(s, coded_contents(layouts, plan, 1, step), 0).ok());
  const auto all = ck::list(dir);
  REQUIRE(all.size() == 2);
  CHECK(fs::path(all[0]).filename() == "step-000040");
  CHECK(fs::path(all[1]).filename() == "step-000030");
  CHECK(cohort::test::read_text(dir + "/latest") == "step-000040\n");
  for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
}

TEST_CASE("writing and verifying report their bytes as they go, ending at the whole") {
  const std::string dir = fresh_dir("progress");
  const parallel_plan plan{.dp = 2};
  const auto layouts = layouts_of(mlp, plan);
  ck::store_settings s;
  s.dir = dir;
  std::vector<std::pair<std::int64_t, std::int64_t>> written;
  s.progress = [&](std::int64_t done, std::int64_t total) { written.push_back({done, total}); };
  auto w = ck::save(s, coded_contents(layouts, plan, 1, 10), 0);
  REQUIRE(w.ok());
  REQUIRE(!written.empty());
  const std::int64_t values = (24 * 36 + 36 + 36 * 30 + 30 + 30 * 10 + 10) * 4 * 3;  // parameters and 2 slots
  CHECK(written.back() == std::make_pair(values, values));
  for (std::size_t i = 1; i < written.size(); ++i) CHECK(written[i].first >= written[i - 1].first);
  std::vector<std::pair<std::int64_t, std::int64_t>> verified;
  auto opened = ck::open(w->path, [&](std::int64_t done, std::int64_t total) { verified.push_back({done, total}); });
  REQUIRE(opened.ok());
  REQUIRE(!verified.empty());
  CHECK(verified.back().first == verified.back().second);  // the file's bytes, header included
  CHECK(verified.back().second == static_cast<std::int64_t>(w->bytes));
}

TEST_CASE("a write that fails leaves the previous checkpoint as it was" * doctest::test_suite("failure")) {
  const std::string dir = fresh_dir("failed-write");
  const parallel_plan plan{.dp = 2};
  const auto layouts = layouts_of(mlp, plan);
  const std::string first = save(dir, coded_contents(layouts, plan, 1, 10));
  write_text(dir + "/.tmp-step-000020", "a file where the temporary directory goes");
  ck::store_settings s;
  s.dir = dir;
  auto w = ck::save(s, coded_contents(layouts, plan, 1, 20), 0);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message.find(".tmp-step-000020") != std::string::npos);
  CHECK(cohort::test::read_text(dir + "/latest") == "step-000010\n");
  CHECK(ck::open(first).ok());
  // another process's file that never comes (sharded: both processes write): the first process
  // gives up in time, keeps the rest
  fs::remove(dir + "/.tmp-step-000020");
  s.timeout = std::chrono::milliseconds(50);
  const parallel_plan sharded{.dp = 2, .shard_params = true};
  auto late = ck::save(s, coded_contents(layouts_of(mlp, sharded), sharded, 2, 20), 0);
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().code == errc::timeout);
  CHECK(late.error().message.find("process 1") != std::string::npos);
  CHECK(ck::list(dir).size() == 1);
}

TEST_CASE("bad checkpoints are refused naming the file and what is wrong" * doctest::test_suite("failure")) {
  const parallel_plan plan{.dp = 2, .shard_params = true};
  const auto layouts = layouts_of(mlp, plan);
  auto fresh = [&](const std::string& name) { return save(fresh_dir(name), coded_contents(layouts, plan, 2, 10)); };
  const std::string file0 = "/" + ck::process_file_name(0);
  {
    const std::string d = fresh("flipped");
    std::string b = cohort::test::read_text(d + file0);
    b[b.size() - 3] ^= 0x10;
    write_text(d + file0, b);
    const auto why = refusal(d);
    CHECK(why.find(d + file0) != std::string::npos);
    CHECK(why.find("sha256") != std::string::npos);
  }
  {
    const std::string d = fresh("truncated");
    std::string b = cohort::test::read_text(d + file0);
    write_text(d + file0, b.substr(0, b.size() - 100));
    CHECK(refusal(d).find("truncated") != std::string::npos);
  }
  {
    const std::string d = fresh("missing");
    fs::remove(d + "/" + ck::process_file_name(1));
    CHECK(refusal(d).find(ck::process_file_name(1) + ": is missing") != std::string::npos);
  }
  {
    const std::string d = fresh("not-json");
    write_text(d + "/manifest.json", "{\"format\": ");
    CHECK(refusal(d).find("manifest.json: is not a JSON object") != std::string::npos);
  }
  auto edit = [&](const std::string& name, const std::function<void(nlohmann::json&)>& f) {
    const std::string d = fresh(name);
    auto m = nlohmann::json::parse(cohort::test::read_text(d + "/manifest.json"));
    f(m);
    write_text(d + "/manifest.json", m.dump());
    return refusal(d);
  };
  CHECK(edit("no-step", [](nlohmann::json& m) { m.erase("step"); }).find("lacks a valid 'step'") != std::string::npos);
  CHECK(edit("version", [](nlohmann::json& m) { m["version"] = 99; }).find("format version 99") != std::string::npos);
  CHECK(edit("escape", [](nlohmann::json& m) {
          m["files"]["../../etc/passwd"] = {{"bytes", 1}, {"sha256", "x"}};
        }).find("not a plain file name") != std::string::npos);
  CHECK(edit("overlap", [](nlohmann::json& m) {
          auto& pieces = m["tensors"]["fc1.weight"]["pieces"];
          pieces.push_back(pieces[0]);
        }).find("overlap") != std::string::npos);
  CHECK(edit("outside", [](nlohmann::json& m) {
          m["tensors"]["fc1.bias"]["pieces"][0]["offsets"] = nlohmann::json::array({100});
        }).find("outside the tensor's shape") != std::string::npos);
  CHECK(edit("uncovered", [](nlohmann::json& m) {
          auto& pieces = m["tensors"]["fc2.weight"]["pieces"];
          pieces.erase(pieces.begin());
        }).find("pieces hold") != std::string::npos);
  CHECK(edit("wrong-shape", [](nlohmann::json& m) {
          auto& p = m["tensors"]["fc3.bias"]["pieces"][0];
          p["shape"] = nlohmann::json::array({p["shape"][0].get<int>() - 1});
        }).find("the manifest says F32") != std::string::npos);
  {  // the safetensors header of a process file longer than the file
    const std::string d = fresh("header");
    std::string b = cohort::test::read_text(d + file0);
    b[3] = 0x01;  // the length grows by 16 MiB: under the limit, past the end
    write_text(d + file0, b);
    auto m = nlohmann::json::parse(cohort::test::read_text(d + "/manifest.json"));
    auto digests =
        ck::file_digests(d, 1);  // the manifest agrees with the damaged file: only the header check refuses it
    REQUIRE(digests.ok());
    m["files"][ck::process_file_name(0)]["sha256"] = digests->at(0).sha256;
    write_text(d + "/manifest.json", m.dump());
    const auto why = refusal(d);
    CAPTURE(why);
    CHECK(why.find("longer than the file") != std::string::npos);
  }
  {  // a model of another shape, and another optimizer
    const std::string d = fresh("model");
    auto opened = ck::open(d);
    REQUIRE(opened.ok());
    const model_fn wider = [](graph& g, std::int64_t b) { return apps::build_mlp(g, {24, 40, 30, 10}, b).loss; };
    auto st = ck::check_compatible(*opened, layouts_of(wider, plan), adamw);
    REQUIRE_FALSE(st.ok());
    CAPTURE(st.error().message);
    CHECK(st.error().message.find("parameter 'fc1.bias' is [36], the model's is [40]") != std::string::npos);
    auto sgd = ck::check_compatible(*opened, layouts, sgd_config{.lr = 0.1f, .momentum = 0.9f});
    REQUIRE_FALSE(sgd.ok());
    CHECK(sgd.error().message.find("adamw") != std::string::npos);
  }
}

TEST_CASE("the newest checkpoint that verifies is found past the ones refused" * doctest::test_suite("failure")) {
  const std::string dir = fresh_dir("newest");
  const parallel_plan plan{.dp = 2};
  const auto layouts = layouts_of(mlp, plan);
  save(dir, coded_contents(layouts, plan, 1, 10));
  const std::string newer = save(dir, coded_contents(layouts, plan, 1, 20));
  fs::remove(newer + "/manifest.json");
  auto found = ck::find_newest(dir);
  REQUIRE(found.ck.has_value());
  CHECK(found.ck->step == 10);
  REQUIRE(found.refused.size() == 1);
  CHECK(found.refused[0].find("step-000020/manifest.json") != std::string::npos);
  CHECK_FALSE(ck::find_newest(fresh_dir("empty")).ck.has_value());
}
