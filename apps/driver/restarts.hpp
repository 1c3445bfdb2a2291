// A job the launcher restarts (--launch.max-restarts): what one attempt tells the launcher and
// what the launcher tells the next. The attempt's first process notes, in the file
// $COHORT_LAUNCH_STATUS, when its first step completed and, when it fails, how many steps it
// had committed, its plan and why; the launcher turns that into the summary's "recoveries"
// ({"step", "lost", "cause", "detect_s", "recover_s", "steps_redone", "plan_before",
// "plan_after", "source": "restart"}) and hands the list to the next attempt in
// $COHORT_RECOVERIES ($COHORT_ATTEMPT numbers the attempts). A process that took over from a
// lost coordinator notes it in $COHORT_LAUNCH_LEADER. Everything read is validated.
//
//   // in the first process of an attempt
//   launch_notes notes;                                  // off unless the launcher asked
//   notes.first_step_done();                             // once, after the first committed step
//   notes.failed(/*committed=*/12, "dp2 tp1 pp1 m1", "lost node 1 ...");
//   // in the summary of the attempt that finished
//   json recoveries = restart_recoveries(/*resumed_step=*/10, notes.first_step_unix_s(), "dp2 tp1 pp1 m1");
#pragma once

#include <cstdint>
#include <string>

#include "apps/driver/report.hpp"

namespace cohort::apps {

/// This attempt of a launched job: 0 for the first ($COHORT_ATTEMPT).
int launch_attempt();

/// Seconds since the epoch (CLOCK_REALTIME: comparable between the processes of one machine).
double unix_seconds();

class launch_notes {
 public:
  launch_notes();
  void first_step_done();
  void failed(std::int64_t committed, const std::string& plan, const std::string& error);
  double first_step_unix_s() const { return first_step_unix_s_; }

 private:
  void write() const;
  std::string path_;
  double first_step_unix_s_ = 0;
  json notes_ = json::object();
};

/// What an attempt's notes say (read by the launcher); fields missing when the attempt never
/// got there (or the file is malformed).
struct attempt_notes {
  double first_step_unix_s = 0;  // 0: no step completed
  std::int64_t failed_step = -1;
  std::string plan, error;
};
attempt_notes read_launch_notes(const std::string& path);

/// A process that took over as the job's coordinator (a lost coordinator's successor) says so
/// in $COHORT_LAUNCH_LEADER (written whole, then renamed), with where it admits processes (its
/// standby port): the launcher's verdict is then its exit code, not process 0's, and a
/// replacement the launcher starts joins there.
void note_leader(int process, const std::string& host, int port);
struct launch_leader {
  int process = -1;  // -1: no note, or not a process of the job
  std::string host;  // where it admits processes ("" and 0 where it does not)
  int port = 0;
};
/// The process that last noted it leads (validated: a process of `processes`, a port in 1..65535).
launch_leader read_launch_leader(const std::string& path, int processes);

/// The summary's "recoveries" of this attempt: the launcher's list with its last entry
/// completed from this attempt (where it resumed, when its first step completed, its plan);
/// an empty array for a job that was never restarted.
json restart_recoveries(std::int64_t resumed_step, double first_step_unix_s, const std::string& plan_after);

}  // namespace cohort::apps
