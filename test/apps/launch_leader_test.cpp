// The note a process that took over from a lost coordinator leaves its launcher
// ($COHORT_LAUNCH_LEADER): written whole, read back validated — a process of the job, and an
// address only where the port is one.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "apps/driver/restarts.hpp"
#include "support/run_files.hpp"

using namespace cohort::apps;

TEST_CASE("the coordinator's note for the launcher round-trips and a bad one names nobody") {
  const std::string path = cohort::test::temp_path("leader", "note");
  std::filesystem::remove(path);
  CHECK(read_launch_leader(path, 4).process == -1);  // no note
  ::setenv("COHORT_LAUNCH_LEADER", path.c_str(), 1);
  note_leader(2, "127.0.0.1", 40123);
  ::unsetenv("COHORT_LAUNCH_LEADER");
  auto l = read_launch_leader(path, 4);
  CHECK(l.process == 2);
  CHECK(l.host == "127.0.0.1");
  CHECK(l.port == 40123);
  CHECK(read_launch_leader(path, 2).process == -1);  // not a process of a job of 2
  struct odd {
    const char* text;
    int process;
    int port;
  };
  for (const odd& c : {odd{"x\n", -1, 0}, odd{"-1 h 80\n", -1, 0}, odd{"3\n", 3, 0}, odd{"1 - 0\n", 1, 0},
                       odd{"1 h 70000\n", 1, 0}, odd{"1 h 0\n", 1, 0}, odd{"1 h\n", 1, 0}, odd{"1 h 443\n", 1, 443}}) {
    CAPTURE(c.text);
    std::ofstream(path) << c.text;
    auto r = read_launch_leader(path, 4);
    CHECK(r.process == c.process);
    CHECK(r.port == c.port);
    CHECK(r.host.empty() == (c.port == 0));
  }
  std::filesystem::remove(path);
}
