// The live figures and their Prometheus text exposition.
#include "apps/driver/live_metrics.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "apps/driver/metrics_server.hpp"

namespace cohort::apps {

void prometheus_options::add_to(option_set& opts) {
  opts.add("metrics.listen", listen,
           "serve Prometheus metrics at http://HOST:PORT/metrics while training (process 0; loopback unless a job "
           "secret is set, which scrapers send as a bearer token)")
      .add("metrics.linger-s", linger_s, "keep serving --metrics.listen this many seconds after the run ends");
}

status prometheus_options::finish() const {
  if (!(linger_s >= 0) || !std::isfinite(linger_s))
    return make_error(errc::invalid_argument, "--metrics.linger-s must be a non-negative number of seconds");
  if (linger_s > 0 && listen.empty())
    return make_error(errc::invalid_argument, "--metrics.linger-s needs --metrics.listen");
  if (!listen.empty())
    if (auto hp = split_host_port(listen, "--metrics.listen"); !hp) return hp.error();
  return {};
}

void live_metrics::start(std::string app, std::string plan, int processes, std::string unit, double predicted_step_s,
                         std::int64_t total_steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  app_ = std::move(app), plan_ = std::move(plan), unit_ = std::move(unit);
  processes_ = processes, predicted_step_s_ = predicted_step_s, total_steps_ = total_steps;
}

void live_metrics::step(std::int64_t steps_done, double loss, double rate, double step_s,
                        const std::vector<planner::task_seconds>& tasks) {
  std::lock_guard<std::mutex> lock(mutex_);
  steps_ = steps_done, loss_ = loss, rate_ = rate, step_s_ = step_s;
  busy_.assign(tasks.size(), -1);
  for (std::size_t r = 0; r < tasks.size(); ++r)
    if (tasks[r].total() > 0 && step_s > 0) busy_[r] = std::min(1.0, tasks[r].total() / step_s);
}

void live_metrics::transition(const std::string& to) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++transitions_;
  plan_ = to;
}

void live_metrics::recovery() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++recoveries_;
}

void live_metrics::checkpoint(bool written) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++(written ? checkpoints_ : checkpoint_failures_);
}

void live_metrics::sources(std::function<std::uint64_t()> data_plane_bytes,
                           std::function<std::uint64_t()> control_plane_bytes, std::function<int()> live_processes) {
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_ = std::move(data_plane_bytes), control_bytes_ = std::move(control_plane_bytes),
  live_ = std::move(live_processes);
}

void live_metrics::freeze_sources() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes_) bytes_ = [b = bytes_()] { return b; };
  if (control_bytes_) control_bytes_ = [b = control_bytes_()] { return b; };
  if (live_) live_ = [l = live_()] { return l; };
}

void live_metrics::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
}

namespace {

// A label value with \, " and newlines escaped, as the format asks.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string live_metrics::text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream o;
  const std::string job = "app=\"" + label(app_) + "\"";
  auto metric = [&](const char* name, const char* type, const char* help, double value,
                    const std::string& labels = "") {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
      << name << "{" << job << (labels.empty() ? "" : "," + labels) << "} " << number(value) << "\n";
  };
  o << "# HELP cohort_run_info The running job: its app and current plan.\n# TYPE cohort_run_info gauge\n"
    << "cohort_run_info{" << job << ",plan=\"" << label(plan_) << "\",unit=\"" << label(unit_) << "\"} 1\n";
  metric("cohort_step", "gauge", "Steps done.", static_cast<double>(steps_));
  metric("cohort_steps_planned", "gauge", "Steps the run was asked for (--train.steps).",
         static_cast<double>(total_steps_));
  metric("cohort_loss", "gauge", "The job's loss at the last step.", loss_);
  metric("cohort_throughput", "gauge", "Items (samples or tokens, see cohort_run_info's unit) per second, last step.",
         rate_);
  metric("cohort_step_seconds", "gauge", "Wall time of the last step.", step_s_);
  metric("cohort_step_seconds_predicted", "gauge", "The planner's prediction for a step of the first plan.",
         predicted_step_s_);
  o << "# HELP cohort_worker_busy_ratio Share of the last step a rank spent in its tasks (ranks of this process).\n"
    << "# TYPE cohort_worker_busy_ratio gauge\n";
  for (std::size_t r = 0; r < busy_.size(); ++r)
    if (busy_[r] >= 0) o << "cohort_worker_busy_ratio{" << job << ",rank=\"" << r << "\"} " << number(busy_[r]) << "\n";
  o << "# HELP cohort_sent_bytes_total Payload bytes this process sent to other processes, by plane.\n"
    << "# TYPE cohort_sent_bytes_total counter\n"
    << "cohort_sent_bytes_total{" << job << ",plane=\"data\"} " << number(bytes_ ? static_cast<double>(bytes_()) : 0.0)
    << "\ncohort_sent_bytes_total{" << job << ",plane=\"control\"} "
    << number(control_bytes_ ? static_cast<double>(control_bytes_()) : 0.0) << "\n";
  metric("cohort_recoveries_total", "counter", "Lost processes the job recovered from.",
         static_cast<double>(recoveries_));
  metric("cohort_transitions_total", "counter", "Plan changes of the running job.", static_cast<double>(transitions_));
  metric("cohort_checkpoints_total", "counter", "Checkpoints written.", static_cast<double>(checkpoints_));
  metric("cohort_checkpoint_failures_total", "counter", "Checkpoints that could not be written.",
         static_cast<double>(checkpoint_failures_));
  metric("cohort_live_processes", "gauge", "Processes in the job now.",
         live_ ? static_cast<double>(live_()) : static_cast<double>(processes_));
  metric("cohort_finished", "gauge", "1 once training has ended.", finished_ ? 1.0 : 0.0);
  return o.str();
}

}  // namespace cohort::apps
