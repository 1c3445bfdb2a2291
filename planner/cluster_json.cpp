// Reading a cluster from JSON: Paddle's auto-parallel cluster file (python/paddle/distributed/
// auto_parallel/static/cluster.py, Cluster._build_from_dict) and cohort's schema (docs/cluster.md).
// Every field is read through `reader`, which knows the JSON path and keeps the first error.
#include "planner/cluster.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

namespace cohort::planner {

namespace {

using json = nlohmann::json;

std::uint64_t pair_key(int a, int b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// JSON: reading fields with their paths. The first error is kept; later reads return defaults
// and the loader stops at its next check (the graph's first-error style).

namespace {

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string item(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

class reader {
 public:
  reader(std::string origin, bool paddle) : origin_(std::move(origin)), paddle_(paddle) {}

  bool failed() const { return err_.has_value(); }
  const error& err() const { return *err_; }
  const std::string& origin() const { return origin_; }
  void fail(const std::string& path, const std::string& what) {
    if (!err_) err_ = make_error(errc::invalid_argument, origin_ + ": " + (path.empty() ? "" : path + ": ") + what);
  }

  bool object(const json& v, const std::string& at) {
    if (!v.is_object()) fail(at, "expected an object, got " + show(v));
    return v.is_object();
  }
  // obj[key] if it is an array; nullptr when absent (an error if required) or not an array.
  const json* array(const json& obj, const std::string& path, const char* key, bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(child(path, key), "missing, expected an array");
      return nullptr;
    }
    if (!it->is_array()) fail(child(path, key), "expected an array, got " + show(*it));
    return it->is_array() ? &*it : nullptr;
  }
  std::string text(const json& obj, const std::string& path, const char* key,
                   std::optional<std::string> fallback = {}) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (!fallback) fail(child(path, key), "missing, expected a string");
      return fallback.value_or("");
    }
    if (!it->is_string()) fail(child(path, key), "expected a string, got " + show(*it));
    return it->is_string() ? it->get<std::string>() : "";
  }
  std::string one_of(const json& obj, const std::string& path, const char* key,
                     std::initializer_list<const char*> options) {
    std::string s = text(obj, path, key);
    if (failed() || std::any_of(options.begin(), options.end(), [&](const char* o) { return s == o; })) return s;
    std::string list;
    for (const char* o : options) list += (list.empty() ? "\"" : ", \"") + std::string(o) + "\"";
    fail(child(path, key), "expected one of " + list + ", got " + show(obj.at(key)));
    return s;
  }
  // A number (Paddle: also a numeric string, as Python's float() reads it), > 0 or >= 0.
  double number(const json& obj, const std::string& path, const char* key, bool positive,
                std::optional<double> fallback = {}) {
    const char* want = positive ? "a number > 0" : "a number >= 0";
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (!fallback) fail(child(path, key), std::string("missing, expected ") + want);
      return fallback.value_or(0);
    }
    std::optional<double> v = as_number(*it);
    if (!v)
      fail(child(path, key), "expected a number, got " + show(*it));
    else if (positive ? !(*v > 0) : !(*v >= 0))
      fail(child(path, key), std::string("expected ") + want + ", got " + show(*it));
    return v.value_or(0);
  }
  int integer(const json& obj, const std::string& path, const char* key, int lo, int hi,
              std::optional<int> fallback = {}) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (!fallback) fail(child(path, key), "missing, expected an integer");
      return fallback.value_or(0);
    }
    std::optional<double> v = as_number(*it);
    if (!v || *v != std::floor(*v))
      fail(child(path, key), "expected an integer, got " + show(*it));
    else if (*v < lo || *v > hi)
      fail(child(path, key), "expected an integer " +
                                 (hi == INT_MAX ? ">= " + std::to_string(lo)
                                                : "from " + std::to_string(lo) + " to " + std::to_string(hi)) +
                                 ", got " + show(*it));
    return failed() ? 0 : static_cast<int>(*v);
  }
  // Cohort's schema is strict: a key it does not know is a typo, not an extension.
  void only_keys(const json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (it.key() == "comment" || std::any_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }))
        continue;
      std::string list;
      for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(child(path, it.key()), "unknown key (expected " + list + " or comment)");
    }
  }

 private:
  std::optional<double> as_number(const json& v) const {
    if (v.is_number()) return v.get<double>();
    if (!paddle_ || !v.is_string()) return std::nullopt;
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    double x = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x)) return std::nullopt;
    return x;
  }

  std::string origin_;
  bool paddle_;
  std::optional<error> err_;
};

// What the loaders collect before make_cluster checks and indexes it.
struct parts {
  std::vector<machine> machines;
  std::vector<device> devices;
  std::vector<link> links;
  std::vector<link_cost> intra;
  link_cost inter;
};

struct id_entry {
  std::string path;  // where the id was defined
  int machine;
  bool compute;  // false for Paddle's NIC entries: valid link ends, not devices
};
using id_table = std::unordered_map<int, id_entry>;

// Checks a parsed link against the ids and the links seen so far, then keeps it (unless it
// touches a NIC). l.hops < 0: not given.
void add_link(reader& r, const std::string& at, const char* source_key, const char* target_key, const id_table& ids,
              std::unordered_map<std::uint64_t, std::string>& seen, link l, parts& p) {
  auto s = ids.find(l.source), t = ids.find(l.target);
  if (s == ids.end()) return r.fail(child(at, source_key), "no device " + std::to_string(l.source));
  if (t == ids.end()) return r.fail(child(at, target_key), "no device " + std::to_string(l.target));
  if (l.source == l.target) return r.fail(at, "a link from device " + std::to_string(l.source) + " to itself");
  auto [it, fresh] = seen.emplace(pair_key(l.source, l.target), at);
  if (!fresh)
    return r.fail(at, "the link " + std::to_string(l.source) + " -> " + std::to_string(l.target) +
                          " is already given at " + it->second);
  if (!s->second.compute || !t->second.compute) return;
  if (l.hops < 0) l.hops = s->second.machine == t->second.machine ? 0 : 1;
  p.links.push_back(std::move(l));
}

result<cluster> finish(reader& r, parts& p) {
  if (!r.failed() && p.devices.empty()) r.fail("machines", "no CPU or GPU devices");
  if (r.failed()) return r.err();
  auto c = make_cluster(std::move(p.machines), std::move(p.devices), std::move(p.links), std::move(p.intra), p.inter);
  if (!c) return make_error(errc::invalid_argument, r.origin() + ": " + c.error().message);
  return c;
}

// Paddle: units GB (1e9 bytes), GFLOP/s, GB/s, ms; ids as written; unknown keys ignored.
result<cluster> load_paddle(reader& r, const json& root) {
  parts p;
  p.inter = paddle_default_link;
  id_table ids;
  const json* machines = r.array(root, "", "machines", true);
  for (std::size_t mi = 0; machines && mi < machines->size() && !r.failed(); ++mi) {
    const json& m = (*machines)[mi];
    std::string at = item("machines", mi);
    if (!r.object(m, at)) break;
    machine mm{r.text(m, at, "hostname"), r.text(m, at, "addr"), r.integer(m, at, "port", 0, 65535, 0), {}};
    const json* devs = r.array(m, at, "devices", true);
    for (std::size_t di = 0; devs && di < devs->size() && !r.failed(); ++di) {
      const json& d = (*devs)[di];
      std::string dat = item(child(at, "devices"), di);
      if (!r.object(d, dat)) break;
      int gid = r.integer(d, dat, "global_id", 0, INT_MAX);
      std::string type = r.one_of(d, dat, "type", {"GPU", "XPU", "DCU", "CPU", "NIC"});
      if (r.failed()) break;
      auto [it, fresh] = ids.emplace(gid, id_entry{dat, static_cast<int>(mi), type != "NIC"});
      if (!fresh) r.fail(child(dat, "global_id"), std::to_string(gid) + " is already used by " + it->second.path);
      if (type == "NIC") continue;  // a network card: Paddle's links may name it; no work runs on it
      device dv;
      dv.global_id = gid;
      dv.local_id = r.integer(d, dat, "local_id", 0, INT_MAX);
      dv.machine = static_cast<int>(mi);
      dv.kind = type == "CPU" ? device_kind::cpu : device_kind::gpu;
      dv.model = r.text(d, dat, "model");
      dv.flops_f32_per_s = 1e9 * r.number(d, dat, "sp_gflops", true);
      dv.flops_f64_per_s = 1e9 * r.number(d, dat, "dp_gflops", true);
      dv.flops_f16_per_s = 1e9 * r.number(d, dat, "hp_gflops", true, dv.flops_f32_per_s / 1e9);
      dv.memory_bytes = 1e9 * r.number(d, dat, "memory", true);
      dv.memory_bandwidth_bytes_per_s = dv.kind == device_kind::gpu ? paddle_gpu_memory_bandwidth_bytes_per_s
                                                                    : paddle_cpu_memory_bandwidth_bytes_per_s;
      p.devices.push_back(std::move(dv));
    }
    p.machines.push_back(std::move(mm));
    p.intra.push_back(paddle_default_link);
  }
  // Links after every device: a machine's list may name devices of later machines.
  std::unordered_map<std::uint64_t, std::string> seen;
  auto read_links = [&](const json& holder, const std::string& path) {
    const json* links = r.failed() ? nullptr : r.array(holder, path, "links", false);
    for (std::size_t li = 0; links && li < links->size() && !r.failed(); ++li) {
      const json& l = (*links)[li];
      std::string at = item(child(path, "links"), li);
      if (!r.object(l, at)) break;
      link lk{r.integer(l, at, "source_global_id", 0, INT_MAX),
              r.integer(l, at, "target_global_id", 0, INT_MAX),
              r.text(l, at, "type"),
              1e9 * r.number(l, at, "bandwidth", true),
              1e-3 * r.number(l, at, "latency", false, 0.0),
              r.integer(l, at, "hop", 0, INT_MAX, -1)};
      if (!r.failed()) add_link(r, at, "source_global_id", "target_global_id", ids, seen, std::move(lk), p);
    }
  };
  for (std::size_t mi = 0; machines && mi < machines->size() && !r.failed(); ++mi)
    read_links((*machines)[mi], item("machines", mi));
  read_links(root, "");
  return finish(r, p);
}

std::string with_index(std::string s, std::size_t index) {
  for (std::size_t at = s.find("{i}"); at != std::string::npos; at = s.find("{i}", at))
    s.replace(at, 3, std::to_string(index));
  return s;
}

link_cost read_cost(reader& r, const json& v, const std::string& at) {
  if (!r.object(v, at)) return {};
  r.only_keys(v, at, {"type", "bandwidth_gb_per_s", "latency_us"});
  r.text(v, at, "type", "");
  return {1e9 * r.number(v, at, "bandwidth_gb_per_s", true), 1e-6 * r.number(v, at, "latency_us", false)};
}

// Cohort's schema (docs/cluster.md): units GB, TFLOP/s, GB/s, us; ids assigned in file order.
result<cluster> load_cohort(reader& r, const json& root) {
  constexpr int max_devices = 1 << 20;
  r.only_keys(root, "", {"cohort_cluster", "machines", "inter_link", "links"});
  if (int version = r.integer(root, "", "cohort_cluster", 0, INT_MAX); !r.failed() && version != 1)
    r.fail("cohort_cluster", "version " + std::to_string(version) + " is not supported (this build reads 1)");
  parts p;
  p.inter = root.contains("inter_link") ? read_cost(r, root.at("inter_link"), "inter_link") : default_inter_link;
  id_table ids;
  const json* machines = r.failed() ? nullptr : r.array(root, "", "machines", true);
  for (std::size_t mi = 0; machines && mi < machines->size() && !r.failed(); ++mi) {
    const json& m = (*machines)[mi];
    std::string at = item("machines", mi);
    if (!r.object(m, at)) break;
    r.only_keys(m, at, {"hostname", "addr", "port", "count", "intra_link", "devices"});
    int copies = r.integer(m, at, "count", 1, max_devices, 1);
    std::string hostname = r.text(m, at, "hostname"), addr = r.text(m, at, "addr", "");
    int port = r.integer(m, at, "port", 0, 65535, 0);
    link_cost intra =
        m.contains("intra_link") ? read_cost(r, m.at("intra_link"), child(at, "intra_link")) : default_intra_link;
    std::vector<std::pair<device, int>> kinds;  // a device and how many of it, per machine
    long per_machine = 0;
    const json* devs = r.array(m, at, "devices", true);
    for (std::size_t di = 0; devs && di < devs->size() && !r.failed(); ++di) {
      const json& d = (*devs)[di];
      std::string dat = item(child(at, "devices"), di), tat = child(dat, "tflops");
      if (!r.object(d, dat)) break;
      r.only_keys(d, dat, {"kind", "model", "count", "tflops", "memory_gb", "memory_bandwidth_gb_per_s", "profile"});
      device dv;
      dv.kind = r.one_of(d, dat, "kind", {"cpu", "gpu"}) == "gpu" ? device_kind::gpu : device_kind::cpu;
      dv.model = r.text(d, dat, "model");
      dv.profile = r.text(d, dat, "profile", "");
      int count = r.integer(d, dat, "count", 1, max_devices, 1);
      if (!d.contains("tflops"))
        r.fail(tat, "missing, expected an object");
      else if (const json& tf = d.at("tflops"); r.object(tf, tat)) {
        r.only_keys(tf, tat, {"f32", "f16", "f64"});
        dv.flops_f32_per_s = 1e12 * r.number(tf, tat, "f32", true);
        dv.flops_f16_per_s = 1e12 * r.number(tf, tat, "f16", true, dv.flops_f32_per_s / 1e12);
        dv.flops_f64_per_s = 1e12 * r.number(tf, tat, "f64", true, dv.flops_f32_per_s / 2e12);
      }
      dv.memory_bytes = 1e9 * r.number(d, dat, "memory_gb", true);
      dv.memory_bandwidth_bytes_per_s = 1e9 * r.number(d, dat, "memory_bandwidth_gb_per_s", true);
      kinds.emplace_back(std::move(dv), count);
      per_machine += count;
    }
    if (!r.failed() && static_cast<double>(p.devices.size()) + static_cast<double>(copies) * per_machine > max_devices)
      r.fail(at, "the cluster would have more than " + std::to_string(max_devices) + " devices");
    for (int k = 0; k < copies && !r.failed(); ++k) {
      int index = static_cast<int>(p.machines.size()), local = 0;
      p.machines.push_back({with_index(hostname, static_cast<std::size_t>(index)),
                            with_index(addr, static_cast<std::size_t>(index)),
                            port,
                            {}});
      p.intra.push_back(intra);
      for (const auto& [proto, count] : kinds)
        for (int c = 0; c < count; ++c) {
          device dv = proto;
          dv.global_id = static_cast<int>(p.devices.size());
          dv.local_id = local++;
          dv.machine = index;
          ids.emplace(dv.global_id, id_entry{at, index, true});
          p.devices.push_back(std::move(dv));
        }
    }
  }
  std::unordered_map<std::uint64_t, std::string> seen;
  const json* links = r.failed() ? nullptr : r.array(root, "", "links", false);
  for (std::size_t li = 0; links && li < links->size() && !r.failed(); ++li) {
    const json& l = (*links)[li];
    std::string at = item("links", li);
    if (!r.object(l, at)) break;
    r.only_keys(l, at, {"source", "target", "type", "bandwidth_gb_per_s", "latency_us", "hops"});
    link lk{r.integer(l, at, "source", 0, INT_MAX),
            r.integer(l, at, "target", 0, INT_MAX),
            r.text(l, at, "type", ""),
            1e9 * r.number(l, at, "bandwidth_gb_per_s", true),
            1e-6 * r.number(l, at, "latency_us", false),
            r.integer(l, at, "hops", 0, INT_MAX, -1)};
    if (!r.failed()) add_link(r, at, "source", "target", ids, seen, std::move(lk), p);
  }
  return finish(r, p);
}

// nlohmann's DOM builder, reporting a syntax error as a message instead of throwing it.
struct dom_builder : nlohmann::detail::json_sax_dom_parser<json> {
  using json_sax_dom_parser::json_sax_dom_parser;
  std::string message;
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& ex) {
    message = ex.what();
    if (auto at = message.find("] "); at != std::string::npos) message.erase(0, at + 2);
    std::replace(message.begin(), message.end(), '\n', ' ');
    return false;
  }
};

}  // namespace

result<cluster> load_cluster_json(const std::string& text, const std::string& origin) {
  json root;
  dom_builder builder(root, /*allow_exceptions=*/false);
  if (!json::sax_parse(text, &builder) || !builder.message.empty())
    return make_error(errc::invalid_argument, origin + ": not valid JSON: " + builder.message);
  bool cohort = root.is_object() && root.contains("cohort_cluster");
  reader r(origin, /*paddle=*/!cohort);
  if (!root.is_object()) {
    r.fail("", "expected a JSON object at the top level, got " + show(root));
    return r.err();
  }
  return cohort ? load_cohort(r, root) : load_paddle(r, root);
}

result<cluster> load_cluster_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return make_error(errc::not_found, path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) return make_error(errc::io_error, path + ": cannot read the file");
  return load_cluster_json(text.str(), path);
}

}  // namespace cohort::planner
