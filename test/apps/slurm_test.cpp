// cohort under Slurm as users run it: Slurm's hostlist syntax expanded as `scontrol show
// hostnames` does, a task's place taken from Slurm's variables (a batch script's own shell is
// not a task; a malformed variable exits 2 naming it), the job secret a multi-host step shares,
// and a real single-machine Slurm (munged, slurmctld, slurmd from Debian's packages, started by
// the test in a directory of its own) running `srun -n2 mlp ...` with the losses of the same job
// under --launch.nproc=2. Where Slurm is absent that case fails saying so, unless
// COHORT_SKIP_SLURM=1.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "apps/driver/slurm.hpp"
#include "run_app.hpp"
#include "support/run_files.hpp"

using cohort::apps::expand_hostlist;
using cohort::test::run;

namespace {

std::string temp_file(const std::string& name) { return cohort::test::temp_path("slurm", name); }

const std::string job = "--data.name=digits --train.steps=20 --train.threads=1 --plan.dp=2";

std::vector<std::string> hosts(const std::string& list) {
  auto h = expand_hostlist(list);
  REQUIRE_MESSAGE(h.ok(), h.error().message);
  return *h;
}

}  // namespace

TEST_CASE("Slurm hostlists expand as scontrol show hostnames does") {
  using v = std::vector<std::string>;
  CHECK(hosts("localhost") == v{"localhost"});
  CHECK(hosts("n[1-3]") == v{"n1", "n2", "n3"});
  CHECK(hosts("n[01-03],a,b[2,4-5]") == v{"n01", "n02", "n03", "a", "b2", "b4", "b5"});
  CHECK(hosts("r[1-2]-n[1-2]") == v{"r1-n1", "r1-n2", "r2-n1", "r2-n2"});
  CHECK(hosts("gpu[098-101]") == v{"gpu098", "gpu099", "gpu100", "gpu101"});
  for (const std::string bad : {"n[3-1]", "n[1-", "n]", "n[]", "n[a-b]", "n[1,,2]"}) {
    CAPTURE(bad);
    CHECK(!expand_hostlist(bad).ok());
  }
}

TEST_CASE("a multi-host step's job secret: task 0 creates it, 0600, the others find it") {
  const std::string dir = temp_file("secrets");
  std::filesystem::remove_all(dir);
  ::setenv("COHORT_SLURM_SECRET_DIR", dir.c_str(), 1);
  cohort::apps::slurm_step later;
  later.procid = 1, later.ntasks = 2, later.nodes = {"n1", "n2"}, later.job_id = "77";
  auto missing = cohort::apps::slurm_secret_file(later, std::chrono::milliseconds(200));
  REQUIRE(!missing.ok());
  CHECK(missing.error().message.find("slurm-77.secret") != std::string::npos);
  cohort::apps::slurm_step first = later;
  first.procid = 0;
  CHECK(first.several_hosts());
  auto made = cohort::apps::slurm_secret_file(first, std::chrono::milliseconds(200));
  REQUIRE_MESSAGE(made.ok(), made.error().message);
  struct stat st {};
  REQUIRE(::stat(made->c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(cohort::test::read_text(*made).size() == 64);
  auto found = cohort::apps::slurm_secret_file(later, std::chrono::milliseconds(200));
  REQUIRE(found.ok());
  CHECK(*found == *made);
  ::unsetenv("COHORT_SLURM_SECRET_DIR");
  std::filesystem::remove_all(dir);
}

TEST_CASE("Slurm's variables place each task: the losses of --launch.nproc=2, bad ones exit 2") {
  const std::string reference = temp_file("launched.jsonl");
  REQUIRE(run(MLP_BINARY, job + " --launch.nproc=2 --metrics.file=" + reference).exit_code == 0);
  // two tasks of a step as srun would start them (job 4242's port), here by hand
  const std::string metrics = temp_file("tasks.jsonl");
  const std::string env = "SLURM_STEP_NODELIST=localhost SLURM_STEP_NUM_TASKS=2 SLURM_JOB_ID=4242 ";
  const std::string node = "SLURM_PROCID=1 SLURM_LOCALID=1 " + env + MLP_BINARY + " " + job + " >/dev/null 2>&1 &";
  auto r = run("sh -c '" + node + " SLURM_PROCID=0 SLURM_LOCALID=0 " + env + MLP_BINARY + " " + job +
                   " --metrics.file=" + metrics + "; wait'",
               "");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(reference));
  CHECK(r.err.find("2 processes") != std::string::npos);
  // a batch script's own shell has SLURM_PROCID and SLURM_NTASKS but is no task of a step
  auto batch = run("SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_JOB_ID=4243 " + std::string(MLP_BINARY), job);
  CHECK(batch.exit_code == 0);
  CHECK(batch.summary["final_loss"].is_number());
  for (const std::string bad : {"SLURM_STEP_NODELIST='n[3-1]' SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2",
                                "SLURM_STEP_NODELIST=localhost SLURM_PROCID=x SLURM_STEP_NUM_TASKS=2",
                                "SLURM_STEP_NODELIST=localhost SLURM_PROCID=2 SLURM_STEP_NUM_TASKS=2"}) {
    CAPTURE(bad);
    auto b = run(bad + " " + MLP_BINARY, job);
    CHECK(b.exit_code == 2);
    CHECK(b.err.find("SLURM_") != std::string::npos);
  }
}

TEST_CASE("srun -n2 on a real single-machine Slurm: the losses of the same job under --launch.nproc=2") {
  if (!std::filesystem::exists("/usr/sbin/slurmctld") || !std::filesystem::exists("/usr/bin/srun") ||
      !std::filesystem::exists("/usr/sbin/munged")) {
    const char* skip = std::getenv("COHORT_SKIP_SLURM");
    if (skip && std::string(skip) == "1") {
      MESSAGE("Slurm not installed and COHORT_SKIP_SLURM=1: Slurm checks skipped");
      return;
    }
    FAIL(
        "Slurm (slurmctld, slurmd, munge) is not installed: scripts/install-deps.sh installs it; "
        "COHORT_SKIP_SLURM=1 opts out");
  }
  const std::string dir = temp_file("cluster");
  const std::string script = std::string(COHORT_SOURCE_DIR) + "/test/support/slurm_cluster.sh";
  const int base = 17000 + static_cast<int>(::getpid() % 2000) * 2;
  auto started = run("bash " + script, "start " + dir + " " + std::to_string(base) + " " + std::to_string(base + 1));
  struct stop_cluster {
    std::string cmd;
    ~stop_cluster() { (void)std::system(cmd.c_str()); }
  } stop{"bash " + script + " stop " + dir};
  if (started.exit_code != 0) {
    const char* skip = std::getenv("COHORT_SKIP_SLURM");
    if (skip && std::string(skip) == "1") {
      MESSAGE("Slurm could not start and COHORT_SKIP_SLURM=1: Slurm checks skipped (" << started.err << ")");
      return;
    }
  }
  REQUIRE_MESSAGE(started.exit_code == 0, "Slurm did not start (COHORT_SKIP_SLURM=1 opts out): " << started.err);
  const std::string conf = "SLURM_CONF=" + dir + "/slurm.conf ";
  const std::string reference = temp_file("reference.jsonl"), metrics = temp_file("srun.jsonl");
  REQUIRE(run(MLP_BINARY, job + " --launch.nproc=2 --metrics.file=" + reference).exit_code == 0);
  auto r = run(conf + "timeout 300 srun -N1 -n2 " + MLP_BINARY, job + " --metrics.file=" + metrics);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(reference));
  CHECK(r.summary["plan"]["dp"] == 2);
  // the real scontrol agrees with the expansion
  auto names = run(conf + "scontrol show hostnames", "'n[01-03],a,b[2,4-5],r[1-2]-n[1-2]'");
  REQUIRE(names.exit_code == 0);
  std::string ours;
  for (const auto& h : hosts("n[01-03],a,b[2,4-5],r[1-2]-n[1-2]")) ours += h + "\n";
  CHECK(names.out == ours);
}
