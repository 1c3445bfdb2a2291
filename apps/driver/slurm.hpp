// Running under Slurm as users do: `srun build/apps/gpt ...` inside an allocation, no wrapper.
// Each task of the step learns its place from Slurm's variables — SLURM_PROCID (its rank),
// SLURM_STEP_NUM_TASKS (the job's size), SLURM_STEP_NODELIST (the step's hosts, expanded as
// `scontrol show hostnames` does; task 0 runs on the first, where the coordinator listens) and
// SLURM_JOB_ID (a port of the job's own) — where RANK / WORLD_SIZE / MASTER_* do not say
// otherwise. A batch script's own shell (no SLURM_STEP_NODELIST) is not a task of a step.
//
//   auto hosts = expand_hostlist("gpu[01-03],login");      // {"gpu01", "gpu02", "gpu03", "login"}
//   if (!hosts) return hosts.error();                      // "n[3-1]": a malformed list, named
//   auto step = slurm_step_from_environment();             // nullopt outside srun
//   if (!step) return step.error();
//   if (*step) std::printf("task %d of %d on %s\n", (*step)->procid, (*step)->ntasks, (*step)->nodes[0].c_str());
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "graph/error.hpp"

namespace cohort::apps {

/// Slurm's hostlist syntax: comma-separated items, each with any number of bracketed groups
/// of numbers and ranges ("n[01-03,7]", "r[1-2]-n[1-2]"; zero padding kept), expanded in order.
/// Errors: an unclosed or empty bracket, a range whose end is below its start, a non-number.
result<std::vector<std::string>> expand_hostlist(const std::string& list);

struct slurm_step {
  int procid = 0, ntasks = 1, localid = 0;
  std::vector<std::string> nodes;  // the step's hosts, in Slurm's order
  std::string job_id;
  /// Whether the step spans more than one host (then the job listens beyond loopback).
  bool several_hosts() const;
};

/// This process's step, from the environment; nullopt when it is not a task of a Slurm step.
/// Errors name the variable that is malformed.
result<std::optional<slurm_step>> slurm_step_from_environment();

/// A port of the job's own for its coordinator, in [20000, 50000), from the job id.
int slurm_port(const std::string& job_id);

/// A step over several hosts listens beyond loopback, so it needs a job secret: where none is
/// set, the job's own file DIR/slurm-JOBID.secret (DIR: $COHORT_SLURM_SECRET_DIR, else
/// $HOME/.cohort; a file system the step's hosts share), which task 0 creates (0600, random)
/// and the others wait for, at most `wait`. Returns its path.
result<std::string> slurm_secret_file(const slurm_step& step, std::chrono::milliseconds wait);

}  // namespace cohort::apps
