// Progress line, metrics JSONL, summary line.
#include "apps/driver/report.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
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

void progress_line::update(std::int64_t step, float loss, double rate, const char* rate_unit, const std::string& more) {
  if (!tty_ && step % every_ != 0 && step != total_ && step != 1) return;
  double elapsed = seconds_since(start_);
  double eta = elapsed / static_cast<double>(step) * static_cast<double>(total_ - step);
  char line[256];
  std::snprintf(line, sizeof line, "%s step %lld/%lld (%3d%%) loss %.4f  %.0f %s  eta %s", label_.c_str(),
                static_cast<long long>(step), static_cast<long long>(total_), static_cast<int>(100 * step / total_),
                static_cast<double>(loss), rate, rate_unit, duration_text(eta).c_str());
  if (tty_)
    std::fprintf(stderr, "\r%s%s\033[K", line, more.c_str());
  else
    std::fprintf(stderr, "%s\n", line);
  std::fflush(stderr);
}

void progress_line::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

phase_progress::phase_progress(std::string label, std::string unit, bool quiet)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      quiet_(quiet),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

std::string phase_progress::amount(double v) const {
  char b[48];
  if (unit_ != "B") {
    std::snprintf(b, sizeof b, "%.0f %s", v, unit_.c_str());
  } else if (v >= 1e9) {
    std::snprintf(b, sizeof b, "%.2f GB", v / 1e9);
  } else if (v >= 1e6) {
    std::snprintf(b, sizeof b, "%.1f MB", v / 1e6);
  } else {
    std::snprintf(b, sizeof b, "%.1f kB", v / 1e3);
  }
  return b;
}

void phase_progress::update(std::int64_t done, std::int64_t total) {
  done_ = done, total_ = total;
  if (quiet_ || !tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - drawn_ < std::chrono::milliseconds(100) && done < total) return;  // at most 10 redraws a second
  drawn_ = now;
  const double elapsed = std::max(1e-9, seconds_since(start_));
  const double rate = static_cast<double>(done) / elapsed;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0.0;
  if (unit_ != "B") {  // counted steps: "calibration 3/6 measurements  eta 2s"
    std::fprintf(stderr, "\r%s %lld/%lld %s  eta %s\033[K", label_.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), unit_.c_str(), duration_text(eta).c_str());
    std::fflush(stderr);
    return;
  }
  std::fprintf(stderr, "\r%s %3d%% %s of %s  %s/s  eta %s\033[K", label_.c_str(),
               total > 0 ? static_cast<int>(100 * done / total) : 0, amount(static_cast<double>(done)).c_str(),
               amount(static_cast<double>(total)).c_str(), amount(rate).c_str(), duration_text(eta).c_str());
  std::fflush(stderr);
}

void phase_progress::finish(const std::string& what) {
  if (quiet_) return;
  const double elapsed = std::max(1e-9, seconds_since(start_));
  const std::string rate = unit_ == "B" ? " (" + amount(static_cast<double>(done_) / elapsed) + "/s)" : "";
  std::fprintf(stderr, "%s%s: %s, %s in %.2f s%s\n", tty_ ? "\r\033[K" : "", label_.c_str(), what.c_str(),
               amount(static_cast<double>(done_)).c_str(), elapsed, rate.c_str());
  std::fflush(stderr);
}

status write_text_atomically(const std::string& path, const std::string& text, const std::string& option) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc | std::ios::binary);
    if (!f) return make_error(errc::io_error, option + ": cannot write " + tmp);
    f << text;
    if (!f.flush()) return make_error(errc::io_error, option + ": writing " + tmp + " failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return make_error(errc::io_error, option + ": " + path + ": " + ec.message());
  return {};
}

metrics_file::~metrics_file() {
  if (file_ != nullptr) std::fclose(file_);
}

status metrics_file::open(const std::string& path, bool append) {
  if (path.empty()) return {};
  if (file_ != nullptr) std::fclose(file_);
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
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
