// The run report's record and its HTML page (inline SVG; no network).
#include "apps/driver/run_report.hpp"

#include "apps/driver/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace cohort::apps {

using json = nlohmann::json;

void report_options::add_to(option_set& opts) {
  opts.add("report.file", file,
           "write a run report here: one self-contained HTML page (plan, loss, throughput, a timeline), at the end "
           "and while the run goes")
      .add("report.every-s", every_s, "rewrite --report.file this often while training (seconds; 0: every step)");
}

status report_options::finish() const {
  if (!(every_s >= 0) || !std::isfinite(every_s))
    return make_error(errc::invalid_argument, "--report.every-s must be a non-negative number of seconds");
  return {};
}

void run_record::add_step(std::int64_t step, double loss, double rate, double seconds,
                          const std::vector<planner::task_seconds>& tasks, int layout_index) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto i = static_cast<std::size_t>(std::max<std::int64_t>(0, step - first_step));
  if (losses_.size() <= i) losses_.resize(i + 1, std::nan("")), rates_.resize(i + 1, 0), seconds_.resize(i + 1, 0);
  losses_[i] = loss, rates_[i] = rate, seconds_[i] = seconds;
  if (layout_index != 0 || step < first_step + warmup || layout.ranks() != static_cast<int>(tasks.size())) return;
  const planner::rank_layout l(layout);
  stage_sums_.resize(static_cast<std::size_t>(layout.pp), {0, 0, 0});
  stage_ranks_.assign(static_cast<std::size_t>(layout.pp), 0);
  for (std::size_t r = 0; r < tasks.size(); ++r) {
    if (tasks[r].total() <= 0) continue;  // another process's rank
    const auto s = static_cast<std::size_t>(l.place_of(static_cast<int>(r)).stage);
    stage_sums_[s][0] += tasks[r].forward_s, stage_sums_[s][1] += tasks[r].backward_s,
        stage_sums_[s][2] += tasks[r].update_s;
    ++stage_ranks_[s];
  }
  ++stage_steps_;
}

void run_record::add_spans(int rank, const planner::rank_place& at, std::int64_t step,
                           const std::vector<actors::task_span>& spans) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (step < first_step + warmup) return;
  if (std::find(span_steps_.begin(), span_steps_.end(), step) == span_steps_.end()) {
    if (span_steps_.size() >= 3) return;
    span_steps_.push_back(step);
  }
  auto row = std::find_if(rows_.begin(), rows_.end(), [&](const span_row& r) { return r.rank == rank; });
  if (row == rows_.end()) {
    rows_.push_back({rank,
                     "rank " + std::to_string(rank) + " · stage " + std::to_string(at.stage) + " · tp " +
                         std::to_string(at.tp_rank) + " · dp " + std::to_string(at.dp_rank),
                     {}});
    row = rows_.end() - 1;
  }
  for (const auto& s : spans) row->spans.push_back({step, s});
}

void run_record::mark(std::int64_t steps_done, const std::string& kind, const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  marks_.push_back({{"step", steps_done}, {"kind", kind}, {"text", text}});
}

void run_record::finish(const json& summary) {
  std::lock_guard<std::mutex> lock(mutex_);
  summary_ = summary;
  finished_ = true;
}

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string seconds_text(double s) { return s >= 1 ? num(s, 4) + " s" : num(s * 1e3, 4) + " ms"; }

const char* mark_colour(const std::string& kind) {
  return kind == "plan change" ? "#7b3fa0" : kind == "recovery" ? "#c0392b" : "#888";
}

// A line chart of ys (x = first_step + 1 + index), with vertical lines at the marks.
std::string line_chart(const std::string& id, const std::string& title, const std::vector<double>& ys,
                       std::int64_t first_step, const std::vector<json>& marks, const std::string& unit) {
  constexpr double w = 860, h = 220, left = 70, right = 20, top = 24, bottom = 36;
  std::vector<std::pair<double, double>> pts;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    if (!std::isfinite(ys[i])) continue;
    pts.push_back({static_cast<double>(first_step + 1 + static_cast<std::int64_t>(i)), ys[i]});
    lo = std::min(lo, ys[i]), hi = std::max(hi, ys[i]);
  }
  std::ostringstream o;
  o << "<section><h2>" << escape(title) << "</h2><svg id=\"" << id << "\" class=\"chart\" viewBox=\"0 0 " << w << " "
    << h << "\" width=\"" << w << "\" height=\"" << h << "\" role=\"img\">";
  if (pts.empty()) {
    o << "<text x=\"" << left << "\" y=\"" << h / 2 << "\">no steps yet</text></svg></section>";
    return o.str();
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) hi = lo + std::max(1e-9, std::abs(lo) * 0.01 + 1e-9);
  const double x0 = pts.front().first, x1 = std::max(pts.back().first, x0 + 1);
  auto X = [&](double x) { return left + (x - x0) / (x1 - x0) * (w - left - right); };
  auto Y = [&](double y) { return top + (hi - y) / (hi - lo) * (h - top - bottom); };
  o << "<line class=\"axis\" x1=\"" << left << "\" y1=\"" << h - bottom << "\" x2=\"" << w - right << "\" y2=\""
    << h - bottom << "\"/><line class=\"axis\" x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\""
    << h - bottom << "\"/>";
  o << "<text class=\"tick\" x=\"" << left - 6 << "\" y=\"" << Y(hi) + 4 << "\" text-anchor=\"end\">" << num(hi)
    << "</text><text class=\"tick\" x=\"" << left - 6 << "\" y=\"" << Y(lo) + 4 << "\" text-anchor=\"end\">" << num(lo)
    << "</text>";
  o << "<text class=\"tick\" x=\"" << X(x0) << "\" y=\"" << h - bottom + 16 << "\">step " << num(x0, 8)
    << "</text><text class=\"tick\" x=\"" << X(x1) << "\" y=\"" << h - bottom + 16 << "\" text-anchor=\"end\">"
    << num(x1, 8) << "</text><text class=\"tick\" x=\"" << left << "\" y=\"" << top - 8 << "\">" << escape(unit)
    << "</text>";
  for (const auto& m : marks) {
    const double x = X(static_cast<double>(m["step"].get<std::int64_t>()) + 0.5);
    if (x < left || x > w - right) continue;
    const std::string kind = m["kind"];
    o << "<line class=\"mark\" stroke=\"" << mark_colour(kind) << "\" x1=\"" << x << "\" y1=\"" << top << "\" x2=\""
      << x << "\" y2=\"" << h - bottom << "\"><title>"
      << escape(kind + " after step " + std::to_string(m["step"].get<std::int64_t>()) + ": " +
                m["text"].get<std::string>())
      << "</title></line>";
  }
  o << "<polyline class=\"series\" data-points=\"" << pts.size() << "\" points=\"";
  for (const auto& [x, y] : pts) o << num(X(x), 6) << "," << num(Y(y), 6) << " ";
  o << "\"/></svg></section>";
  return o.str();
}

const char* span_colour(const actors::task_span& s) {
  if (s.kind == planner::task_kind::forward) return "#4e79a7";
  if (s.kind == planner::task_kind::backward) return "#59a14f";
  return "#f28e2b";
}

}  // namespace

std::string run_record::html() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream o;
  const auto done = static_cast<std::int64_t>(
      std::count_if(losses_.begin(), losses_.end(), [](double l) { return std::isfinite(l); }));
  o << "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>cohort " << escape(app) << " · "
    << escape(plan) << "</title><style>"
    << "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:920px;color:#222}"
    << "h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}"
    << "table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}"
    << "th:first-child,td:first-child{text-align:left}pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}"
    << ".chart .axis{stroke:#999}.chart .tick{font-size:11px;fill:#555}.series{fill:none;stroke:#1f77b4;"
    << "stroke-width:1.6}.mark{stroke-dasharray:4 3;stroke-width:1.4}.status{color:#555}"
    << ".legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-2px}"
    << "</style></head><body>";
  o << "<h1>" << escape(app) << ": <span id=\"plan\">" << escape(plan)
    << "</span></h1><div class=\"status\" id=\"status\">" << (finished_ ? "finished" : "running") << " · " << done
    << " of " << (total_steps - first_step) << " steps · " << processes << (processes == 1 ? " process" : " processes")
    << " · plan chosen: " << escape(how) << "</div>";
  // the figures of the run
  o << "<h2>Run</h2><table id=\"figures\">";
  if (finished_)
    for (const auto& [k, v] : summary_.items())
      if (v.is_number() || v.is_string())
        o << "<tr><td>" << escape(k) << "</td><td>"
          << escape(v.is_string() ? v.get<std::string>() : num(v.get<double>(), 6)) << "</td></tr>";
  if (!finished_ && !losses_.empty())
    o << "<tr><td>last loss</td><td>" << num(losses_.back(), 6) << "</td></tr><tr><td>" << escape(rate_unit)
      << "</td><td>" << num(rates_.back(), 5) << "</td></tr>";
  o << "</table>";
  // the plan: predicted against measured per stage
  if (predicted.contains("stages") && predicted["stages"].is_array()) {
    o << "<h2>Predicted and measured, per stage (seconds per step, the first plan's timed steps)</h2><table "
         "id=\"stages\"><tr><th>stage</th><th>forward</th><th>backward</th><th>update</th><th>measured forward</th>"
         "<th>backward</th><th>reduction</th></tr>";
    const auto& st = predicted["stages"];
    for (std::size_t s = 0; s < st.size(); ++s) {
      o << "<tr><td>" << s << "</td><td>" << seconds_text(st[s].value("forward_s", 0.0)) << "</td><td>"
        << seconds_text(st[s].value("backward_s", 0.0)) << "</td><td>" << seconds_text(st[s].value("update_s", 0.0))
        << "</td>";
      if (s < stage_sums_.size() && stage_ranks_[s] > 0 && stage_steps_ > 0) {
        const double n = static_cast<double>(stage_steps_) * stage_ranks_[s];
        for (int k = 0; k < 3; ++k)
          o << "<td>" << seconds_text(stage_sums_[s][static_cast<std::size_t>(k)] / n) << "</td>";
      } else {
        o << "<td colspan=\"3\">(another process)</td>";
      }
      o << "</tr>";
    }
    o << "</table><p class=\"status\">Predicted update: the gradient reduction and the optimizer; the runtime "
         "measures the reduction (the optimizer runs inside the next step's first task). Measured: the mean over "
         "this process's ranks of each stage.</p>";
    if (predicted.contains("step_s")) {
      std::vector<double> timed(
          seconds_.begin() + std::min<std::size_t>(seconds_.size(), static_cast<std::size_t>(warmup)), seconds_.end());
      std::sort(timed.begin(), timed.end());
      o << "<p>Step: predicted " << seconds_text(predicted["step_s"].get<double>());
      if (!timed.empty()) o << ", measured " << seconds_text(timed[timed.size() / 2]) << " (median)";
      o << ".</p>";
    }
  }
  if (!table.empty()) o << "<h2>The planner's ranked plans</h2><pre id=\"ranked\">" << escape(table) << "</pre>";
  o << line_chart("loss", "Loss", losses_, first_step, marks_, "loss");
  o << line_chart("throughput", "Throughput", rates_, first_step, marks_, rate_unit);
  // the timeline of a few steps
  o << "<section><h2>Timeline of steps";
  for (auto s : span_steps_) o << " " << s + 1;
  o << "</h2>";
  std::int64_t t0 = std::numeric_limits<std::int64_t>::max(), t1 = 0;
  for (const auto& r : rows_)
    for (const auto& [step, s] : r.spans) t0 = std::min(t0, s.begin_ns), t1 = std::max(t1, s.done_ns);
  if (rows_.empty() || t1 <= t0) {
    o << "<p>No timeline (the workers of this process were not traced).</p></section>";
  } else {
    auto rows = rows_;
    std::sort(rows.begin(), rows.end(), [](const span_row& a, const span_row& b) { return a.rank < b.rank; });
    constexpr double w = 860, left = 190, row_h = 22;
    const double h = 30 + row_h * static_cast<double>(rows.size());
    auto X = [&](std::int64_t ns) {
      return left + static_cast<double>(ns - t0) / static_cast<double>(t1 - t0) * (w - left - 10);
    };
    o << "<svg id=\"timeline\" viewBox=\"0 0 " << w << " " << h << "\" width=\"" << w << "\" height=\"" << h << "\">";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double y = 8 + row_h * static_cast<double>(i);
      o << "<text class=\"tick\" x=\"4\" y=\"" << y + 14 << "\" font-size=\"11\">" << escape(rows[i].name) << "</text>";
      for (const auto& [step, s] : rows[i].spans) {
        const double x = X(s.begin_ns), width = std::max(0.5, X(s.end_ns) - x);
        o << "<rect x=\"" << num(x, 6) << "\" y=\"" << y << "\" width=\"" << num(width, 6) << "\" height=\""
          << row_h - 6 << "\" fill=\"" << span_colour(s) << "\"><title>step " << step + 1 << " "
          << (s.kind == planner::task_kind::forward    ? "forward"
              : s.kind == planner::task_kind::backward ? "backward"
                                                       : "update")
          << (s.micro_batch >= 0 ? " micro-batch " + std::to_string(s.micro_batch) : std::string()) << ": "
          << num(static_cast<double>(s.end_ns - s.begin_ns) / 1e3, 4) << " us</title></rect>";
      }
    }
    o << "<text class=\"tick\" x=\"" << left << "\" y=\"" << h - 4
      << "\" font-size=\"11\">0</text><text class=\"tick\" x=\"" << w - 10 << "\" y=\"" << h - 4
      << "\" font-size=\"11\" text-anchor=\"end\">" << seconds_text(static_cast<double>(t1 - t0) / 1e9)
      << "</text></svg>";
    o << "<div class=\"legend\"><span style=\"background:#4e79a7\"></span>forward<span style=\"background:#59a14f\">"
         "</span>backward<span style=\"background:#f28e2b\"></span>update (gradient reduction); gaps: waiting "
         "(bubbles)</div></section>";
  }
  if (!marks_.empty()) {
    o << "<h2>Events</h2><table id=\"events\"><tr><th>after step</th><th>event</th><th></th></tr>";
    for (const auto& m : marks_)
      o << "<tr><td>" << m["step"].get<std::int64_t>() << "</td><td>" << escape(m["kind"].get<std::string>())
        << "</td><td>" << escape(m["text"].get<std::string>()) << "</td></tr>";
    o << "</table>";
  }
  // what the browser parsed: the loss curve's points as it counts them (the browser test reads it)
  o << "<p class=\"status\">Loss points drawn: <span id=\"drawn\">?</span></p><script>"
       "(function(){var p=document.querySelector('#loss polyline');"
       "document.getElementById('drawn').textContent=p?String(p.points.numberOfItems):'0';})();</script>";
  o << "</body></html>\n";
  return o.str();
}

status write_report(const std::string& path, const run_record& r) {
  return write_text_atomically(path, r.html(), "--report.file");
}

}  // namespace cohort::apps
