// The notes between a restarted job's attempts and its launcher.
#include "apps/driver/restarts.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cohort::apps {

int launch_attempt() {
  const char* v = std::getenv("COHORT_ATTEMPT");
  if (!v) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && *end == 0 && n >= 0 && n < 1000000 ? static_cast<int>(n) : 0;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

launch_notes::launch_notes() {
  if (const char* p = std::getenv("COHORT_LAUNCH_STATUS")) path_ = p;
}

void launch_notes::first_step_done() {
  if (first_step_unix_s_ > 0) return;
  first_step_unix_s_ = unix_seconds();
  notes_["first_step_unix_s"] = first_step_unix_s_;
  write();
}

void launch_notes::failed(std::int64_t committed, const std::string& plan, const std::string& error) {
  notes_["failed_step"] = committed;
  notes_["plan"] = plan;
  notes_["error"] = error;
  write();
}

void launch_notes::write() const {
  if (path_.empty()) return;
  const std::string tmp = path_ + ".tmp";
  std::ofstream(tmp) << notes_.dump() << "\n";
  std::rename(tmp.c_str(), path_.c_str());
}

attempt_notes read_launch_notes(const std::string& path) {
  attempt_notes n;
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) > 65536 || ec) return n;  // ours, and small: anything else is ignored
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return n;
  if (j.contains("first_step_unix_s") && j["first_step_unix_s"].is_number())
    n.first_step_unix_s = j["first_step_unix_s"].get<double>();
  if (j.contains("failed_step") && j["failed_step"].is_number_integer())
    n.failed_step = j["failed_step"].get<std::int64_t>();
  if (j.contains("plan") && j["plan"].is_string()) n.plan = j["plan"].get<std::string>();
  if (j.contains("error") && j["error"].is_string()) n.error = j["error"].get<std::string>();
  return n;
}

json restart_recoveries(std::int64_t resumed_step, double first_step_unix_s, const std::string& plan_after) {
  const char* v = std::getenv("COHORT_RECOVERIES");
  if (!v) return json::array();
  auto list = json::parse(v, nullptr, false);
  if (list.is_discarded() || !list.is_array() || list.empty() || !list.back().is_object()) return json::array();
  json& last = list.back();
  if (last.contains("step") && last["step"].is_number_integer())
    // (the failed attempt's count can lag its checkpoint by the loss sums still in flight)
    last["steps_redone"] = std::max<std::int64_t>(0, last["step"].get<std::int64_t>() - resumed_step);
  if (last.contains("stopped_unix_s") && last["stopped_unix_s"].is_number() && first_step_unix_s > 0)
    last["recover_s"] = first_step_unix_s - last["stopped_unix_s"].get<double>();
  last["plan_after"] = plan_after;
  for (auto& r : list)
    if (r.is_object()) r.erase("stopped_unix_s");
  return list;
}

void note_leader(int process, const std::string& host, int port) {
  const char* path = std::getenv("COHORT_LAUNCH_LEADER");
  if (path == nullptr || *path == 0) return;
  const std::string tmp = std::string(path) + ".tmp-" + std::to_string(::getpid());
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%d %s %d\n", process, host.empty() ? "-" : host.c_str(), port);
    std::fclose(f);
    std::rename(tmp.c_str(), path);
  }
}

launch_leader read_launch_leader(const std::string& path, int processes) {
  launch_leader out;
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return out;
  int p = -1, port = 0;
  char host[256] = {0};
  const int read = std::fscanf(f, "%d %255s %d", &p, host, &port);
  std::fclose(f);
  if (read < 1 || p < 0 || p >= processes) return out;
  out.process = p;
  if (read == 3 && port >= 1 && port <= 65535 && std::string(host) != "-") out.host = host, out.port = port;
  return out;
}

}  // namespace cohort::apps
