// Progress line, metrics JSONL, summary line.
#include "apps/driver/report.hpp"

#include <unistd.h>

#include <cmath>
#include <iostream>

namespace cohort::apps {
namespace {

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

}  // namespace

progress_line::progress_line(std::string label, std::int64_t total_steps)
    : label_(std::move(label)),
      total_(std::max<std::int64_t>(total_steps, 1)),
      tty_(isatty(STDERR_FILENO) != 0),
      every_(std::max<std::int64_t>(1, total_ / 20)),
      start_(std::chrono::steady_clock::now()) {}

void progress_line::update(std::int64_t step, float loss, double rate, const char* rate_unit) {
  if (!tty_ && step % every_ != 0 && step != total_ && step != 1) return;
  double elapsed = seconds_since(start_);
  double eta = elapsed / static_cast<double>(step) * static_cast<double>(total_ - step);
  char line[256];
  std::snprintf(line, sizeof line, "%s step %lld/%lld (%3d%%) loss %.4f  %.0f %s  eta %s", label_.c_str(),
                static_cast<long long>(step), static_cast<long long>(total_), static_cast<int>(100 * step / total_),
                static_cast<double>(loss), rate, rate_unit, duration_text(eta).c_str());
  if (tty_)
    std::fprintf(stderr, "\r%s\033[K", line);
  else
    std::fprintf(stderr, "%s\n", line);
  std::fflush(stderr);
}

void progress_line::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

metrics_file::~metrics_file() {
  if (file_ != nullptr) std::fclose(file_);
}

status metrics_file::open(const std::string& path) {
  if (path.empty()) return {};
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) return make_error(errc::io_error, "cannot write metrics file '" + path + "'");
  return {};
}

void metrics_file::write(const json& record) {
  if (file_ == nullptr) return;
  std::string line = record.dump();
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

void print_summary(const json& summary) {
  // a string that is not UTF-8 (a byte-level model's output) is printed with U+FFFD, not thrown on
  std::cout << summary.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
}

int exit_code_for(const error& e) {
  switch (e.code) {
    case errc::invalid_argument:
    case errc::shape_mismatch:
    case errc::dtype_mismatch:
    case errc::not_found:
      return 2;
    default:
      return 1;
  }
}

int fail(const std::string& app, const std::string& message, int code) {
  // one write: the lines of a job's processes, sharing a terminal, do not interleave
  const std::string line = app + ": error: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  return code;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace cohort::apps
