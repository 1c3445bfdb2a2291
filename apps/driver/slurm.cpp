// Slurm's variables and its hostlist syntax.
#include "apps/driver/slurm.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

namespace cohort::apps {
namespace {

// Splits at commas outside brackets.
result<std::vector<std::string>> top_level_items(const std::string& list) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return make_error(errc::invalid_argument, "hostlist '" + list + "': a ']' unopened");
    if (c == ',' && depth == 0) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (depth != 0) return make_error(errc::invalid_argument, "hostlist '" + list + "': a '[' unclosed");
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// "01-03,7" -> {"01", "02", "03", "7"}
result<std::vector<std::string>> expand_group(const std::string& group, const std::string& list) {
  std::vector<std::string> out;
  const auto bad = [&](const std::string& what) {
    return make_error(errc::invalid_argument, "hostlist '" + list + "': " + what);
  };
  std::size_t at = 0;
  while (at <= group.size()) {
    const auto comma = group.find(',', at);
    const std::string part = group.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const auto dash = part.find('-');
    if (dash == std::string::npos) {
      if (!digits(part)) return bad("'" + part + "' is not a number");
      out.push_back(part);
    } else {
      const std::string lo = part.substr(0, dash), hi = part.substr(dash + 1);
      if (!digits(lo) || !digits(hi)) return bad("'" + part + "' is not a range of numbers");
      if (lo.size() > 9 || hi.size() > 9) return bad("'" + part + "' is too long");
      const long a = std::stol(lo), b = std::stol(hi);
      if (b < a) return bad("the range " + part + " ends below its start");
      if (b - a > 100000) return bad("the range " + part + " is over 100000 hosts");
      const std::size_t width = lo.size();  // zero padding, as Slurm keeps it
      for (long v = a; v <= b; ++v) {
        std::string s = std::to_string(v);
        if (s.size() < width) s.insert(0, width - s.size(), '0');
        out.push_back(s);
      }
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

result<int> int_variable(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return make_error(errc::invalid_argument, std::string(name) + " is not set");
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != 0 || x < 0 || x > 1000000)
    return make_error(errc::invalid_argument, std::string(name) + "=" + v + " is not a count");
  return static_cast<int>(x);
}

}  // namespace

result<std::vector<std::string>> expand_hostlist(const std::string& list) {
  auto items = top_level_items(list);
  if (!items) return items.error();
  std::vector<std::string> out;
  for (const auto& item : *items) {
    std::vector<std::string> names{""};
    std::size_t at = 0;
    while (at < item.size()) {
      const auto open = item.find('[', at);
      const std::string literal = item.substr(at, open == std::string::npos ? std::string::npos : open - at);
      for (auto& n : names) n += literal;
      if (open == std::string::npos) break;
      const auto close = item.find(']', open);
      if (close == std::string::npos || close == open + 1)
        return make_error(errc::invalid_argument, "hostlist '" + list + "': an empty or unclosed '['");
      auto group = expand_group(item.substr(open + 1, close - open - 1), list);
      if (!group) return group.error();
      std::vector<std::string> next;
      for (const auto& n : names)
        for (const auto& g : *group) next.push_back(n + g);
      if (next.size() > 1000000) return make_error(errc::invalid_argument, "hostlist '" + list + "': too many hosts");
      names = std::move(next);
      at = close + 1;
    }
    out.insert(out.end(), names.begin(), names.end());
  }
  return out;
}

bool slurm_step::several_hosts() const { return std::set<std::string>(nodes.begin(), nodes.end()).size() > 1; }

result<std::optional<slurm_step>> slurm_step_from_environment() {
  const char* nodelist = std::getenv("SLURM_STEP_NODELIST");
  if (nodelist == nullptr || std::getenv("SLURM_PROCID") == nullptr) return std::optional<slurm_step>{};
  slurm_step s;
  auto procid = int_variable("SLURM_PROCID");
  if (!procid) return procid.error();
  auto ntasks = int_variable(std::getenv("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS");
  if (!ntasks) return ntasks.error();
  if (std::getenv("SLURM_LOCALID")) {
    auto local = int_variable("SLURM_LOCALID");
    if (!local) return local.error();
    s.localid = *local;
  }
  if (*ntasks < 1 || *procid >= *ntasks)
    return make_error(errc::invalid_argument, "SLURM_PROCID=" + std::to_string(*procid) + " is not below the step's " +
                                                  std::to_string(*ntasks) + " tasks");
  auto nodes = expand_hostlist(nodelist);
  if (!nodes) return make_error(errc::invalid_argument, "SLURM_STEP_NODELIST: " + nodes.error().message);
  if (nodes->empty()) return make_error(errc::invalid_argument, "SLURM_STEP_NODELIST is empty");
  s.procid = *procid, s.ntasks = *ntasks, s.nodes = std::move(*nodes);
  if (const char* id = std::getenv("SLURM_JOB_ID")) s.job_id = id;
  return std::optional<slurm_step>(std::move(s));
}

result<std::string> slurm_secret_file(const slurm_step& step, std::chrono::milliseconds wait) {
  if (step.job_id.empty()) return make_error(errc::invalid_argument, "SLURM_JOB_ID is not set: no job secret to share");
  const char* dir_env = std::getenv("COHORT_SLURM_SECRET_DIR");
  const char* home = std::getenv("HOME");
  if (!dir_env && !home)
    return make_error(errc::invalid_argument,
                      "neither COHORT_SLURM_SECRET_DIR nor HOME is set: no place for the job secret");
  const std::filesystem::path dir = dir_env ? dir_env : std::filesystem::path(home) / ".cohort";
  const auto path = dir / ("slurm-" + step.job_id + ".secret");
  if (step.procid == 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
    if (!std::filesystem::exists(path)) {
      std::ifstream random("/dev/urandom", std::ios::binary);
      unsigned char bytes[32];
      if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes))
        return make_error(errc::io_error, "cannot read /dev/urandom for the job secret");
      static const char* hex = "0123456789abcdef";
      std::string text;
      for (unsigned char b : bytes) text += hex[b >> 4], text += hex[b & 15];
      const auto tmp = path.string() + ".tmp";
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) return make_error(errc::io_error, "cannot create the job secret " + tmp);
      const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      ::close(fd);
      if (!written) return make_error(errc::io_error, "cannot write the job secret " + tmp);
      std::filesystem::rename(tmp, path, ec);
      if (ec) return make_error(errc::io_error, "cannot create the job secret " + path.string() + ": " + ec.message());
    }
    return path.string();
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline)
      return make_error(errc::timeout, "task 0 did not create the job secret " + path.string() + " (is " +
                                           dir.string() + " shared by the step's hosts?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return path.string();
}

int slurm_port(const std::string& job_id) {
  unsigned long h = 0;
  for (char c : job_id) h = h * 31 + static_cast<unsigned char>(c);
  return 20000 + static_cast<int>(h % 30000);
}

}  // namespace cohort::apps
