// Device profiles: parsed and validated before use (every key known, every number in range).
#include "planner/device_profile.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

namespace cohort::planner {
namespace {

using json = nlohmann::json;

status unknown_keys(const json& j, const std::set<std::string>& known, const std::string& where) {
  for (auto& [k, v] : j.items())
    if (!known.count(k)) return make_error(errc::invalid_argument, where + ": unknown key '" + k + "'");
  return {};
}

result<double> number(const json& j, const char* key, const std::string& where, bool required) {
  if (!j.contains(key)) {
    if (required) return make_error(errc::invalid_argument, where + "." + key + ": missing");
    return -1.0;
  }
  if (!j[key].is_number() || !(j[key].get<double>() >= 0))
    return make_error(errc::invalid_argument, where + "." + key + ": expected a non-negative number");
  return j[key].get<double>();
}

}  // namespace

device_profile default_device_profile(const std::string& model) {
  device_profile d;
  d.model = model;
  d.eff = efficiency{}.without_runtime_overhead();
  d.source = "uncalibrated defaults: no device profile for " + (model.empty() ? std::string("the devices") : model);
  return d;
}

result<device_profile> parse_device_profile(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(errc::invalid_argument, origin + ": not a JSON object");
  if (!j.contains("cohort_device_profile") || j["cohort_device_profile"] != 1)
    return make_error(errc::invalid_argument,
                      origin + ": not a cohort device profile (no \"cohort_device_profile\": 1)");
  if (auto st = unknown_keys(j, {"cohort_device_profile", "model", "sources", "comment", "efficiency"}, origin); !st)
    return st.error();
  device_profile d;
  d.source = origin;
  if (!j.contains("model") || !j["model"].is_string() || j["model"].get<std::string>().empty())
    return make_error(errc::invalid_argument, origin + ": model: expected the device model's name");
  d.model = j["model"].get<std::string>();
  if (j.contains("sources")) {
    if (!j["sources"].is_array()) return make_error(errc::invalid_argument, origin + ": sources: expected strings");
    for (const auto& s : j["sources"]) {
      if (!s.is_string()) return make_error(errc::invalid_argument, origin + ": sources: expected strings");
      d.sources.push_back(s.get<std::string>());
    }
  }
  if (!j.contains("efficiency") || !j["efficiency"].is_object())
    return make_error(errc::invalid_argument, origin + ": efficiency: missing");
  const json& e = j["efficiency"];
  const std::string where = origin + ": efficiency";
  if (auto st = unknown_keys(
          e, {"gemm", "gemm_by_flops", "attention", "memory", "link", "per_op_seconds", "per_step_seconds"}, where);
      !st)
    return st.error();
  efficiency eff = efficiency{}.without_runtime_overhead();
  for (auto [key, target, required] : {std::tuple<const char*, double*, bool>{"memory", &eff.memory, true},
                                       {"link", &eff.link, true},
                                       {"per_op_seconds", &eff.per_op_seconds, true},
                                       {"per_step_seconds", &eff.per_step_seconds, false},
                                       {"attention", &eff.attention, false},
                                       {"gemm", &eff.gemm, false}}) {
    auto v = number(e, key, where, required);
    if (!v) return v.error();
    if (*v >= 0) *target = *v;
  }
  if (e.contains("gemm_by_flops")) {
    const json& t = e["gemm_by_flops"];
    if (!t.is_array() || t.empty())
      return make_error(errc::invalid_argument, where + ".gemm_by_flops: expected [[flops, efficiency], ...]");
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_array() || t[i].size() != 2 || !t[i][0].is_number() || !t[i][1].is_number())
        return make_error(errc::invalid_argument,
                          where + ".gemm_by_flops[" + std::to_string(i) + "]: expected [flops, efficiency]");
      eff.gemm_by_flops.push_back({t[i][0].get<double>(), t[i][1].get<double>()});
    }
    if (!e.contains("gemm")) eff.gemm = eff.gemm_by_flops.back()[1];  // a shape-less GEMM: the largest's
  } else if (!e.contains("gemm")) {
    return make_error(errc::invalid_argument, where + ": needs gemm_by_flops (or one gemm efficiency for every size)");
  }
  if (auto problem = efficiency_problem(eff); !problem.empty())
    return make_error(errc::invalid_argument, origin + ": " + problem);
  d.eff = std::move(eff);
  return d;
}

result<device_profile> load_device_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::not_found, "cannot read the device profile " + path);
  std::error_code ec;
  constexpr std::uintmax_t most_bytes = 1 << 20;  // a profile is a few hundred bytes
  if (auto size = std::filesystem::file_size(path, ec); !ec && size > most_bytes)
    return make_error(errc::invalid_argument, path + ": " + std::to_string(size) +
                                                  " bytes, more than a device profile "
                                                  "can be (1 MiB)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_device_profile(text.str(), path);
}

}  // namespace cohort::planner
