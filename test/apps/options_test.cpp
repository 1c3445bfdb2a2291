// Options: the command line and CAF's INI config files, with typed errors instead of CAF's
// silent drops, and the command line overriding the file.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/driver/options.hpp"

using namespace cohort;
using namespace cohort::apps;

namespace {

struct fixture {
  std::int64_t steps = 10;
  double lr = 0.1;
  std::string name = "digits";
  bool flag = false;
  std::vector<std::int64_t> dims;
  option_set opts{"t", "test"};
  fixture() {
    opts.add("train.steps", steps, "steps")
        .add("train.lr", lr, "lr")
        .add("data.name", name, "name")
        .add("plan.shard-params", flag, "flag")
        .add("model.dims", dims, "dims");
  }
  result<parse_outcome> parse(std::vector<std::string> args) { return opts.parse(args); }
};

std::string ini(const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("cohort-options-" + std::to_string(std::rand()) + ".ini");
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("command-line values of every type") {
  fixture f;
  auto r = f.parse({"--train.steps=5", "--train.lr=1e-3", "--data.name=fashion", "--plan.shard-params=true",
                    "--model.dims=784,256,10"});
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(f.steps == 5);
  CHECK(f.lr == 1e-3);
  CHECK(f.name == "fashion");
  CHECK(f.flag);
  CHECK(f.dims == std::vector<std::int64_t>{784, 256, 10});
  CHECK(f.opts.was_set("train.steps"));
  fixture g;
  REQUIRE(g.parse({"--plan.shard-params"}).ok());
  CHECK(g.flag);
  REQUIRE(g.parse({"--plan.shard-params=false"}).ok());
  CHECK_FALSE(g.flag);
}

TEST_CASE("command-line errors name the option and the expected type") {
  fixture f;
  CHECK(f.parse({"--train.steps=abc"}).error().message == "command line: train.steps must be an integer, got 'abc'");
  CHECK(f.parse({"--train.lr=0.1x"}).error().message == "command line: train.lr must be a number, got '0.1x'");
  CHECK(f.parse({"--plan.shard-params=maybe"}).error().message ==
        "command line: plan.shard-params must be true or false, got 'maybe'");
  CHECK(f.parse({"--train.stepz=3"}).error().message == "unknown option --train.stepz (see --help)");
  CHECK(f.parse({"--train.steps"}).error().message == "--train.steps needs a value: --train.steps=VALUE");
  CHECK(f.parse({"positional"}).error().message ==
        "unexpected argument 'positional' (options look like --section.key=value)");
}

TEST_CASE("an INI file sets options, the command line overrides it, CAF sections pass through") {
  fixture f;
  auto path =
      ini("[train]\nsteps=7\nlr=2\n[data]\nname=\"mnist\"\n[model]\ndims=[64, 10]\n[scheduler]\nmax-threads=2\n");
  auto r = f.parse({"--config-file=" + path, "--train.steps=9"});
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(f.steps == 9);
  CHECK(f.lr == 2.0);  // an integer is a fine value for a real option
  CHECK(f.name == "mnist");
  CHECK(f.dims == std::vector<std::int64_t>{64, 10});
  CHECK(f.opts.caf_arguments() == std::vector<std::string>{"--scheduler.max-threads=2"});
  std::remove(path.c_str());
}

TEST_CASE("INI errors: wrong type, unknown key, syntax, missing file") {
  {
    fixture f;
    auto path = ini("[train]\nsteps=\"abc\"\n");
    auto r = f.parse({"--config-file=" + path});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "config file '" + path + "': train.steps must be an integer, got string \"abc\"");
  }
  {
    fixture f;
    auto path = ini("[train]\nstepz=3\n");
    CHECK(f.parse({"--config-file=" + path}).error().message ==
          "config file '" + path + "': unknown option train.stepz (see --help)");
  }
  {
    fixture f;
    auto path = ini("[data]\nname=mnist\n");
    auto msg = f.parse({"--config-file=" + path}).error().message;
    CHECK(msg.find("strings need quotes") != std::string::npos);
    CHECK(msg.find("line") != std::string::npos);
  }
  {
    fixture f;
    auto r = f.parse({"--config-file=/nonexistent/x.ini"});
    CHECK(r.error().code == errc::not_found);
    CHECK(r.error().message == "cannot open config file '/nonexistent/x.ini'");
  }
}

TEST_CASE("--help lists every option with its default") {
  fixture f;
  auto text = f.opts.help_text();
  CHECK(text.find("--train.steps=INT") != std::string::npos);
  CHECK(text.find("(default: 10)") != std::string::npos);
  CHECK(text.find("--model.dims=INTS") != std::string::npos);
  CHECK(text.find("--config-file=FILE") != std::string::npos);
}
