// The pieces of apps/training.cpp that the single- and the multi-process paths share: the
// per-step bookkeeping (progress line, metrics file, throughput) and one run on the actor
// runtime (its task times go to the planner actor's online refit). Internal to the driver.
//
//   training_job job;
//   job.app = "mlp";  job.model = tiny_mlp;  job.data = tiny_batch;  job.batch = 64;  job.steps = 10;
//   plan_options plan;                                      // parsed and finished (training.hpp)
//   planner::plan_choice choice;                            // planner::choose_plan's, or given:
//   choice.plan = {.dp = 2};  choice.how = "manual";
//   loop_state loop(job);                                   // progress + metrics of one run
//   auto r = train_runtime(job, plan, choice, /*caf_arguments=*/{}, loop, start_point{});
//   if (!r) return r.error();
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/runtime.hpp"
#include "apps/driver/training.hpp"
#include "planner/plan_choice.hpp"
#include "planner/run_refit.hpp"

namespace cohort::apps {

/// One run's progress line, metrics file, first and final loss and throughput.
struct loop_state {
  const training_job& job;
  progress_line progress;
  metrics_file metrics;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), timed_start = start;
  // when the last step was reported: the rate ends there, not after the runtime has gathered
  // the trained parameters (seconds for gigabytes of embedding tables)
  std::chrono::steady_clock::time_point last_step_end = start;
  training_result out;

  bool quiet = false;                     // another process reports
  int process = 0;                        // of the job
  std::shared_ptr<trace_recorder> trace;  // --trace.file: this process's events
  std::shared_ptr<run_record> report;     // --report.file (process 0): the page, rewritten as it goes
  std::shared_ptr<live_metrics> live;     // --metrics.listen (process 0): what a scrape sees
  /// The background checkpoint write in progress (bytes of this process's file), for the line.
  struct write_meter {
    std::atomic<std::int64_t> done{0}, total{0}, started_ns{0};
  };
  std::shared_ptr<write_meter> writing = std::make_shared<write_meter>();
  std::string report_path;
  double report_every_s = 10;
  std::chrono::steady_clock::time_point report_written = start;
  bool report_failed = false;                   // said once
  std::int64_t last_committed = 0;              // steps done so far (a resumed run's first step included)
  std::int64_t samples = 0, timed_samples = 0;  // trained by this run, and after the warm-up steps

  explicit loop_state(const training_job& j) : job(j), progress(j.app, j.steps), last_committed(j.first_step) {}

  /// `m`: the runtime's record of the step (task times), absent for the serial trainer.
  void on_step(std::int64_t step, float loss, json extra = json::object(),
               const actors::step_metrics* m = nullptr) {  // step is 0-based
    if (step == job.first_step) out.first_loss = loss;
    last_committed = step + 1;
    last_step_end = std::chrono::steady_clock::now();
    if (step + 1 == job.first_step + job.warmup + 1) timed_start = std::chrono::steady_clock::now();
    out.final_loss = loss;
    // the step's batch (under --elastic.batch=scale it follows the plan) and learning rate
    const std::int64_t rows = m && m->rows > 0 ? m->rows : job.batch;
    const double lr = m && m->lr > 0 ? m->lr : learning_rate(job.optimizer);
    samples += rows;
    if (step >= job.first_step + job.warmup) timed_samples += rows;
    double elapsed = seconds_since(start);
    double rate = static_cast<double>(samples * job.items_per_sample) / elapsed;
    // the step's own throughput where its time is known (the serial trainer: the mean so far)
    const double step_rate = m && m->seconds > 0 ? static_cast<double>(rows * job.items_per_sample) / m->seconds : rate;
    const double step_s = m ? m->seconds : 0.0;
    static const std::vector<planner::task_seconds> no_tasks;
    const auto& tasks = m ? m->task_seconds : no_tasks;
    // the report's record on every process (one that takes over from the coordinator writes it)
    if (report) report->add_step(step, loss, step_rate, step_s, tasks, m ? m->layout : 0);
    if (quiet) return;
    if (live) live->step(step + 1, loss, step_rate, step_s, tasks);
    if (report && seconds_since(report_written) >= report_every_s) write_report_now();
    progress.update(step + 1, loss, rate, job.rate_unit, writing_text());
    json rec = {{"step", step + 1}, {"loss", loss}, {"lr", lr}, {"time", elapsed}};
    if (rows != job.batch) rec["batch"] = rows;
    rec[std::string(job.rate_unit) == "tokens/s" ? "tokens_per_s" : "samples_per_s"] = rate;
    for (auto& [k, v] : extra.items()) rec[k] = v;
    metrics.write(rec);
  }

  /// " · checkpoint 45% 120 MB/s eta 0.2s" while a checkpoint is being written, else "".
  std::string writing_text() const {
    const std::int64_t done = writing->done.load(), total = writing->total.load();
    if (total <= 0 || done >= total) return "";
    const double s = std::max(1e-9, static_cast<double>(std::chrono::steady_clock::now().time_since_epoch().count() -
                                                        writing->started_ns.load()) /
                                        1e9);
    const double rate = static_cast<double>(done) / s;
    char b[96];
    std::snprintf(b, sizeof b, "  · checkpoint %d%% %.0f MB/s eta %.1fs", static_cast<int>(100 * done / total),
                  rate / 1e6, rate > 0 ? static_cast<double>(total - done) / rate : 0.0);
    return b;
  }

  /// Writes the page as it stands (a failure is said once on stderr; training goes on).
  void write_report_now() {
    report_written = std::chrono::steady_clock::now();
    if (auto st = write_report(report_path, *report); !st && !report_failed) {
      report_failed = true;
      std::fprintf(stderr, "\nwarning: %s\n", st.error().message.c_str());
    }
  }

  void finish() {
    if (live) live->finished();
    if (!quiet) progress.finish();
    const std::int64_t run = job.steps - job.first_step;  // the steps this run trained
    std::int64_t timed = run > job.warmup ? run - job.warmup : run;
    if (run <= job.warmup) timed_start = start;
    const auto end = last_step_end > timed_start ? last_step_end : std::chrono::steady_clock::now();
    const std::int64_t timed_rows = run > job.warmup ? timed_samples : samples;
    out.items_per_s = static_cast<double>((timed_rows > 0 ? timed_rows : timed * job.batch) * job.items_per_sample) /
                      std::chrono::duration<double>(end - timed_start).count();
  }
};

/// Starts --report.file's record (on every process of `processes`; the coordinator writes the
/// page, a process that takes over from it writes it whole): the plan, how it was chosen, the
/// planner's table and prediction.
void start_report(loop_state& loop, const plan_options& p, const planner::plan_choice& choice, int processes);

/// Starts --metrics.listen's endpoint and figures (process 0 of `processes`); the planes' byte
/// counts and `live_processes` are read at each scrape (empty: 0 bytes, every process live). The
/// job secret guards a non-loopback address. Errors: the address, a port in use.
status start_live_metrics(loop_state& loop, const plan_options& p, const planner::plan_choice& choice, int processes,
                          std::function<std::uint64_t()> data_plane_bytes,
                          std::function<std::uint64_t()> control_plane_bytes, std::function<int()> live_processes);

/// --eval.every: one evaluation of `params` after `steps_done` steps, its figures a metrics
/// record and a stderr line; its time is left out of the throughput (the serial trainer between
/// its steps, the runtime on process 0 once the committed parameters are gathered).
status evaluate_between_steps(const training_job& job, loop_state& loop, std::int64_t steps_done,
                              const parameter_store& params);

/// Trains `job` under `choice` on the actor runtime; `customize` may change the runtime's
/// options last (the refit, plan changes, multi-process hooks).
result<training_result> train_runtime(const training_job& job, const plan_options& p,
                                      const planner::plan_choice& choice, const std::vector<std::string>& caf_arguments,
                                      loop_state& loop, const start_point& start,
                                      const std::function<void(actors::run_options&)>& customize = {});

/// One process of a multi-process job (apps/training_processes.cpp), from `start`.
result<training_result> train_processes(const training_job& job, const plan_options& p,
                                        const std::vector<std::string>& caf_arguments,
                                        const std::shared_ptr<const start_point>& start);

/// A run in this process (serial, or on the actor runtime), from `start` (apps/training.cpp).
result<training_result> train_here(const training_job& job, const plan_options& p,
                                   const std::vector<std::string>& caf_arguments,
                                   const std::shared_ptr<const start_point>& start);

}  // namespace cohort::apps
