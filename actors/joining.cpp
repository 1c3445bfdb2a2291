// A replacement's or a joining process's view of the running job: to and from process 0's text.
#include "actors/joining.hpp"

#include <nlohmann/json.hpp>

namespace cohort::actors {

std::string to_text(const joining_state& s) {
  nlohmann::json j;
  j["plan"] = s.plan.to_json();
  j["plan"].erase("predicted");
  j["plan"].erase("how");
  j["owner_before"] = s.owner_before;
  j["live_before"] = s.live_before;
  j["replaced_before"] = s.replaced_before;
  j["committed"] = s.committed;
  if (s.next) {
    j["next"] = s.next->to_json();
    j["next"].erase("predicted");
    j["next"].erase("how");
    j["next_replan_s"] = s.next_replan_s;
    j["next_predicted_step_s"] = s.next_predicted_step_s;
  }
  j["cursor"] = nlohmann::json::array();
  for (const auto& c : s.cursor) j["cursor"].push_back({c.step, c.sample, c.rows});
  j["scale_base_dp"] = s.scale_base_dp;
  return j.dump();
}

result<joining_state> joining_from_text(const std::string& text, int processes) {
  auto bad = [](const std::string& what) {
    return make_error(errc::io_error, "join: process 0's view of the running job: " + what);
  };
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  for (const char* f :
       {"plan", "owner_before", "live_before", "replaced_before", "committed", "cursor", "scale_base_dp"})
    if (!j.contains(f)) return bad(std::string("no \"") + f + "\"");
  joining_state s;
  auto plan = planner::plan_from_json(j["plan"], "process 0's running plan");
  if (!plan) return plan.error();
  s.plan = std::move(*plan);
  const auto& owners = j["owner_before"];
  if (!owners.is_array() || static_cast<int>(owners.size()) != s.plan.plan.ranks())
    return bad("\"owner_before\" must name the process of each of the plan's " + std::to_string(s.plan.plan.ranks()) +
               " ranks");
  for (const auto& o : owners) {
    if (!o.is_number_integer() || o.get<int>() < 0 || o.get<int>() >= processes)
      return bad("\"owner_before\" holds " + o.dump() + ", not a process of " + std::to_string(processes));
    s.owner_before.push_back(o.get<int>());
  }
  const auto& live = j["live_before"];
  if (!live.is_array() || static_cast<int>(live.size()) != processes)
    return bad("\"live_before\" must have one flag per process (" + std::to_string(processes) + ")");
  for (const auto& l : live) {
    if (!l.is_boolean()) return bad("\"live_before\" holds " + l.dump() + ", not true or false");
    s.live_before.push_back(l.get<bool>());
  }
  if (!j["replaced_before"].is_number_unsigned() || j["replaced_before"].get<std::size_t>() > 1u << 20)
    return bad("\"replaced_before\" must be a count");
  s.replaced_before = j["replaced_before"].get<std::size_t>();
  if (!j["committed"].is_number_integer() || j["committed"].get<std::int64_t>() < -1)
    return bad("\"committed\" must be an integer >= -1");
  s.committed = j["committed"].get<std::int64_t>();
  if (!j["cursor"].is_array() || j["cursor"].size() > 1u << 20) return bad("\"cursor\" must be a list");
  for (const auto& c : j["cursor"]) {
    if (!c.is_array() || c.size() != 3 || !c[0].is_number_integer() || !c[1].is_number_integer() ||
        !c[2].is_number_integer() || c[0].get<std::int64_t>() < 0 || c[1].get<std::int64_t>() < 0 ||
        c[2].get<std::int64_t>() < 1 || (!s.cursor.empty() && c[0].get<std::int64_t>() <= s.cursor.back().step))
      return bad("\"cursor\" holds " + c.dump() + ", not [step, sample, rows] after the last (rows >= 1)");
    s.cursor.push_back({c[0].get<std::int64_t>(), c[1].get<std::int64_t>(), c[2].get<std::int64_t>()});
  }
  if (!j["scale_base_dp"].is_number_integer() || j["scale_base_dp"].get<int>() < 0 ||
      j["scale_base_dp"].get<int>() > 1 << 20)
    return bad("\"scale_base_dp\" must be a count");
  s.scale_base_dp = j["scale_base_dp"].get<int>();
  if (j.contains("next")) {
    auto next = planner::plan_from_json(j["next"], "process 0's next plan");
    if (!next) return next.error();
    s.next = std::move(*next);
    for (const char* f : {"next_replan_s", "next_predicted_step_s"})
      if (!j.contains(f) || !j[f].is_number() || j[f].get<double>() < 0)
        return bad(std::string("\"") + f + "\" must be a number >= 0");
    s.next_replan_s = j["next_replan_s"].get<double>();
    s.next_predicted_step_s = j["next_predicted_step_s"].get<double>();
  }
  return s;
}

}  // namespace cohort::actors
