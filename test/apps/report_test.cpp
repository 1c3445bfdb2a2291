// The run report (--report.file) as a person sees it: headless Chromium loads the page, takes a
// screenshot (docs/images/report.png is one of them) and dumps the DOM it built; the test checks
// what a reader would: the loss curve has one point per step as the browser parsed it, the plan
// the run chose heads the page and tops the planner's table, the plan change is marked, the
// timeline has a track per rank, and the page raised no script error. A run killed midway
// leaves the page it had written so far ("running", its steps). Where Chromium is absent the
// browser checks fail saying so, unless COHORT_SKIP_BROWSER=1 (then they say they skipped).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "run_app.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

std::string temp_file(const std::string& name) { return cohort::test::temp_path("report", name); }

std::string chromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (std::filesystem::exists(c)) return c;
  return "";
}

// Runs the browser headless on `page`: its stdout (the DOM with --dump-dom) and its stderr.
struct browser_run {
  int exit_code;
  std::string out, err;
};
browser_run browse(const std::string& page, const std::string& what) {
  const std::string err_path = temp_file("chromium.err");
  const std::string cmd = "timeout 120 " + chromium() +
                          " --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
                          "--enable-logging=stderr --v=0 --user-data-dir=" +
                          temp_file("profile") + " --window-size=1000,1800 " + what + " file://" + page + " 2>" +
                          err_path;
  browser_run r{-1, "", ""};
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (fgets(buf, sizeof buf, p) != nullptr) r.out += buf;
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = cohort::test::read_text(err_path);
  return r;
}

bool browser_present() {
  if (!chromium().empty()) return true;
  const char* skip = std::getenv("COHORT_SKIP_BROWSER");
  if (skip && std::string(skip) == "1") {
    MESSAGE("Chromium not installed and COHORT_SKIP_BROWSER=1: browser checks skipped");
    return false;
  }
  FAIL("Chromium is not installed (scripts/install-deps.sh installs it; COHORT_SKIP_BROWSER=1 opts out)");
  return false;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("the run report in a real browser: one point per step, the chosen plan, the plan change, no errors") {
  const std::string page = temp_file("run.html");
  const std::string to = temp_file("dp4.json");
  std::ofstream(to) << R"({"dp":4})"
                    << "\n";
  auto r = run(MLP_BINARY,
               "--data.name=digits --train.steps=30 --train.threads=1 --plan.ranks=4 "
               "--plan.max-micro-batches=4 --plan.change-at=20 --plan.change-to=" +
                   to + " --report.file=" + page);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.summary["report"] == page);
  const std::string html = cohort::test::read_text(page);
  // the page as written: the chosen plan heads it and tops the ranked table
  std::smatch m;
  REQUIRE(std::regex_search(html, m, std::regex("<span id=\"plan\">([^<]+)</span>")));
  const std::string plan = m[1];
  CHECK(plan.find("dp") == 0);
  REQUIRE(std::regex_search(html, m, std::regex("<pre id=\"ranked\">[^\\n]*\\n\\s+1\\s+([^\\n]+?)\\s{2,}")));
  CHECK(std::string(m[1]) == plan);
  CHECK(html.find("finished · 30 of 30 steps") != std::string::npos);
  CHECK(count(html, "data-points=\"30\"") == 2);  // the loss and the throughput, a point per step
  CHECK(html.find("plan change") != std::string::npos);
  CHECK(html.find("test_accuracy") != std::string::npos);
  CHECK(html.find("http") == std::string::npos);  // nothing to fetch
  if (!browser_present()) return;
  // what the browser built: its own count of the curve's points, written by the page's script
  auto dom = browse(page, "--dump-dom");
  REQUIRE_MESSAGE(dom.exit_code == 0, dom.err);
  CHECK(dom.out.find("<span id=\"drawn\">30</span>") != std::string::npos);
  CHECK(count(dom.out, "<rect") >= 4 * 3 * 2);  // a timeline track per rank: 4 ranks, 3 steps, f and b at least
  CHECK(dom.err.find("Uncaught") == std::string::npos);
  CHECK(dom.err.find(":CONSOLE(") == std::string::npos);  // the page logs nothing, so any console line is an error
  // and a picture of it, as a person would see it
  const std::string shot = cohort::test::temp_path("report", "screenshot.png");
  std::filesystem::remove(shot);
  auto pic = browse(page, "--screenshot=" + shot);
  REQUIRE_MESSAGE(pic.exit_code == 0, pic.err);
  std::ifstream png(shot, std::ios::binary);
  std::string head(24, '\0');
  png.read(head.data(), 24);
  REQUIRE(png.good());
  CHECK(head.substr(1, 3) == "PNG");
  const auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned>(static_cast<unsigned char>(head[at])) << 24) |
           (static_cast<unsigned>(static_cast<unsigned char>(head[at + 1])) << 16) |
           (static_cast<unsigned>(static_cast<unsigned char>(head[at + 2])) << 8) |
           static_cast<unsigned>(static_cast<unsigned char>(head[at + 3]));
  };
  CHECK(be32(16) == 1000);                          // the window's width
  CHECK(std::filesystem::file_size(shot) > 20000);  // not a blank page
  MESSAGE("screenshot: " << shot);
}

TEST_CASE("a run killed midway leaves the report it had written: running, the steps so far") {
  const std::string page = temp_file("killed.html");
  std::filesystem::remove(page);
  auto r = run(MLP_BINARY,
               "--data.name=digits --train.steps=40 --train.threads=1 --plan.dp=2 --launch.nproc=2 "
               "--report.file=" +
                   page + " --report.every-s=0 --fault.signal=KILL --fault.signal-rank=0 --fault.signal-step=10");
  CHECK(r.exit_code != 0);
  const std::string html = cohort::test::read_text(page);
  REQUIRE_MESSAGE(!html.empty(), "no page written before the kill");
  CHECK(html.find("running · ") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(html, m, std::regex("<polyline class=\"series\" data-points=\"(\\d+)\"")));
  const int points = std::stoi(m[1]);
  CHECK(points >= 1);
  CHECK(points <= 11);  // killed after step 10
  CHECK(html.find("2 processes") != std::string::npos);
}

TEST_CASE("bad report options: exit 2 naming the option") {
  auto r = run(MLP_BINARY, "--data.name=digits --train.steps=2 --report.file=/tmp/x.html --report.every-s=-1");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--report.every-s") != std::string::npos);
  auto unwritable = run(MLP_BINARY, "--data.name=digits --train.steps=2 --report.file=/nonexistent/dir/r.html");
  CHECK(unwritable.exit_code != 0);
  CHECK(unwritable.err.find("--report.file") != std::string::npos);
}
