// The Chrome trace of a run: options, the recorder, the file.
#include "apps/driver/tracing.hpp"

#include "apps/driver/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace cohort::apps {

using json = nlohmann::json;

void trace_options::add_to(option_set& opts) {
  opts.add("trace.file", file,
           "write a timeline of every worker's tasks here (Chrome trace JSON: open it in ui.perfetto.dev or "
           "chrome://tracing); several processes: merged on process 0")
      .add("trace.steps", steps,
           "trace steps A:B (1-based, inclusive; default: the first 100, which bounds the file and its memory)");
}

status trace_options::finish() {
  if (!steps.empty() && file.empty()) return make_error(errc::invalid_argument, "--trace.steps needs --trace.file");
  if (file.empty()) return {};
  if (steps.empty()) return {};  // steps_from() gives the default
  const auto bad =
      make_error(errc::invalid_argument, "--trace.steps must be A:B with 1 <= A <= B, got '" + steps + "'");
  const auto colon = steps.find(':');
  if (colon == std::string::npos) return bad;
  std::int64_t a = 0, b = 0;
  try {
    std::size_t used_a = 0, used_b = 0;
    a = std::stoll(steps.substr(0, colon), &used_a);
    b = std::stoll(steps.substr(colon + 1), &used_b);
    if (used_a != colon || used_b != steps.size() - colon - 1) return bad;
  } catch (const std::exception&) {
    return bad;
  }
  if (a < 1 || b < a) return bad;
  window = {a - 1, b - 1};
  return {};
}

namespace {

const char* task_name(const actors::task_span& s) {
  if (s.kind == planner::task_kind::forward) return "forward";
  if (s.kind == planner::task_kind::backward) return "backward";
  return s.micro_batch == actors::gather_micro_batch ? "gather parameters" : "reduce gradients";
}

double us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

constexpr std::int64_t min_wait_ns = 1000;  // shorter waits are not drawn (a task that found its inputs there)

}  // namespace

void trace_recorder::add_spans(int rank, const planner::rank_place& at, std::int64_t step,
                               const std::vector<actors::task_span>& spans) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::none_of(ranks_.begin(), ranks_.end(), [&](const auto& r) { return r.first == rank; }))
    ranks_.push_back({rank, "rank " + std::to_string(rank) + " (dp " + std::to_string(at.dp_rank) + ", stage " +
                                std::to_string(at.stage) + ", tp " + std::to_string(at.tp_rank) + ")"});
  for (const auto& s : spans) {
    json args = {{"step", step + 1}, {"stage", at.stage}, {"dp", at.dp_rank}, {"tp", at.tp_rank}};
    if (s.micro_batch >= 0) args["micro_batch"] = s.micro_batch;
    if (s.chunk > 0) args["chunk"] = s.chunk;  // interleaved 1F1B: the rank's chunk
    if (s.bytes_sent > 0) args["bytes"] = s.bytes_sent;
    auto complete = [&](const char* name, const char* cat, std::int64_t from, std::int64_t to) {
      events_.push_back({{"name", name},
                         {"cat", cat},
                         {"ph", "X"},
                         {"ts", us(from)},
                         {"dur", us(to - from)},
                         {"pid", process_},
                         {"tid", rank},
                         {"args", args}});
    };
    const bool update = s.kind == planner::task_kind::update;
    if (s.begin_ns - s.wait_ns >= min_wait_ns) complete("wait", "wait", s.wait_ns, s.begin_ns);
    complete(task_name(s), update ? "comm" : "compute", s.begin_ns, s.end_ns);
    if (s.done_ns - s.end_ns >= min_wait_ns) complete(update ? "hand over" : "send", "comm", s.end_ns, s.done_ns);
    auto [it, first] = steps_.try_emplace(step, s.wait_ns, s.done_ns);
    if (!first) it->second = {std::min(it->second.first, s.wait_ns), std::max(it->second.second, s.done_ns)};
  }
}

void trace_recorder::mark(const std::string& name, json args, std::int64_t at_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back({{"name", name},
                     {"cat", "run"},
                     {"ph", "i"},
                     {"s", "p"},
                     {"ts", us(at_ns)},
                     {"pid", process_},
                     {"tid", run_track},
                     {"args", std::move(args)}});
}

json trace_recorder::events(double offset_us) const {
  std::lock_guard<std::mutex> lock(mutex_);
  json out = json::array();
  out.push_back({{"name", "process_name"},
                 {"ph", "M"},
                 {"pid", process_},
                 {"args", {{"name", "process " + std::to_string(process_)}}}});
  out.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", process_}, {"tid", run_track}, {"args", {{"name", "run"}}}});
  out.push_back({{"name", "thread_sort_index"},
                 {"ph", "M"},
                 {"pid", process_},
                 {"tid", run_track},
                 {"args", {{"sort_index", -1}}}});
  auto ranks = ranks_;
  std::sort(ranks.begin(), ranks.end());
  for (const auto& [r, name] : ranks) {
    out.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", process_}, {"tid", r}, {"args", {{"name", name}}}});
    out.push_back(
        {{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", process_}, {"tid", r}, {"args", {{"sort_index", r}}}});
  }
  for (const auto& [step, span] : steps_)
    out.push_back({{"name", "step " + std::to_string(step + 1)},
                   {"cat", "step"},
                   {"ph", "X"},
                   {"ts", us(span.first) + offset_us},
                   {"dur", us(span.second - span.first)},
                   {"pid", process_},
                   {"tid", run_track},
                   {"args", {{"step", step + 1}}}});
  for (json e : events_) {
    e["ts"] = e["ts"].get<double>() + offset_us;
    out.push_back(std::move(e));
  }
  return out;
}

result<json> gather_trace(transport::control_plane& control, const trace_recorder& mine, std::uint64_t clock_key,
                          std::uint64_t lines_key, int rounds) {
  const int n = control.world(), me = control.process();
  // the clocks: process 0's send time s0 and the gather's return g0 bracket when each process
  // read its clock; the round with the narrowest bracket gives its offset
  std::vector<double> offset_us(static_cast<std::size_t>(n), 0.0),
      residual_us(static_cast<std::size_t>(n), std::numeric_limits<double>::infinity());
  residual_us[0] = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::int64_t s0 = actors::trace_clock_ns();
    auto told = control.broadcast_text(clock_key, me == 0 ? std::to_string(s0) : "");
    if (!told) return told.error();
    const std::int64_t arrived = actors::trace_clock_ns();
    auto back = control.all_gather_text(lines_key, std::to_string(arrived));
    if (!back) return back.error();
    if (me != 0) continue;
    const std::int64_t g0 = actors::trace_clock_ns();
    for (int p = 1; p < n && p < static_cast<int>(back->size()); ++p) {
      const std::string& line = (*back)[static_cast<std::size_t>(p)];
      if (line.empty()) continue;  // no longer in the job
      std::int64_t r = 0;
      try {
        r = std::stoll(line);
      } catch (const std::exception&) {
        return make_error(errc::io_error, "trace: process " + std::to_string(p) + " sent a malformed clock reading");
      }
      const double half = us(g0 - s0) / 2;
      if (half < residual_us[static_cast<std::size_t>(p)]) {
        residual_us[static_cast<std::size_t>(p)] = half;
        offset_us[static_cast<std::size_t>(p)] = us(s0) + half - us(r);
      }
    }
  }
  // the events, in lines of at most `chunk` bytes ('+' more follows, '.' the last), every
  // process's text concatenated on process 0
  const std::string text = mine.events().dump();
  const std::size_t chunk = std::min<std::size_t>(60000, 900000 / static_cast<std::size_t>(std::max(n, 1)));
  std::vector<std::string> texts(static_cast<std::size_t>(n));
  std::vector<bool> done(static_cast<std::size_t>(n), false);
  std::size_t at = 0;
  for (;;) {
    const std::size_t take = std::min(chunk, text.size() - at);
    const bool more = at + take < text.size();
    auto lines = control.all_gather_text(lines_key, (more ? "+" : ".") + text.substr(at, take));
    if (!lines) return lines.error();
    at += take;
    bool all_done = true;
    for (int p = 0; p < n && p < static_cast<int>(lines->size()); ++p) {
      const std::string& line = (*lines)[static_cast<std::size_t>(p)];
      if (done[static_cast<std::size_t>(p)]) continue;
      if (line.empty() || line[0] == '.') done[static_cast<std::size_t>(p)] = true;
      if (!line.empty()) texts[static_cast<std::size_t>(p)] += line.substr(1);
      all_done = all_done && done[static_cast<std::size_t>(p)];
    }
    if (all_done) break;
  }
  if (me != 0) return json::object();
  json events = json::array();
  for (int p = 0; p < n; ++p) {
    if (texts[static_cast<std::size_t>(p)].empty()) continue;
    json theirs = json::parse(texts[static_cast<std::size_t>(p)], nullptr, false);
    if (theirs.is_discarded() || !theirs.is_array())
      return make_error(errc::io_error, "trace: process " + std::to_string(p) + " sent malformed events");
    for (auto& e : theirs) {
      if (!e.is_object())
        return make_error(errc::io_error, "trace: process " + std::to_string(p) + " sent a non-event");
      if (e.contains("ts")) {
        if (!e["ts"].is_number()) return make_error(errc::io_error, "trace: an event without a numeric time");
        e["ts"] = e["ts"].get<double>() + offset_us[static_cast<std::size_t>(p)];
      }
      events.push_back(std::move(e));
    }
  }
  for (auto& r : residual_us)
    if (!std::isfinite(r)) r = -1;  // not measured (a lost process)
  return json{{"events", std::move(events)}, {"offsets_us", offset_us}, {"residual_us", residual_us}};
}

status write_trace(const std::string& path, json events, const json& other) {
  double origin = std::numeric_limits<double>::infinity();
  for (const auto& e : events)
    if (e.contains("ts")) origin = std::min(origin, e["ts"].get<double>());
  if (!std::isfinite(origin)) origin = 0;
  for (auto& e : events)
    if (e.contains("ts")) e["ts"] = e["ts"].get<double>() - origin;
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  return write_text_atomically(path, doc.dump() + "\n", "--trace.file");
}

}  // namespace cohort::apps
