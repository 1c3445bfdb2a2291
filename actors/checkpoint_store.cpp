// Checkpoint directories: the atomic multi-process write, `latest`, pruning, finding the newest.
#include "actors/checkpoint_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace cohort::actors::checkpoint {
namespace fs = std::filesystem;
namespace {

error io(const std::string& path, const std::string& what) { return make_error(errc::io_error, path + ": " + what); }

status sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io(dir, std::string("cannot open: ") + std::strerror(errno));
  const int rc = ::fsync(fd);
  const std::string why = std::strerror(errno);
  ::close(fd);
  if (rc != 0) return io(dir, "fsync failed: " + why);
  return {};
}

status write_small_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return io(tmp, "cannot write");
  }
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    return io(tmp, std::string("fsync failed: ") + std::strerror(errno));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return io(path, std::string("rename failed: ") + std::strerror(errno));
  return {};
}

std::string marker_name(int process) {
  std::string n = process_file_name(process);
  return n.substr(0, n.size() - std::string(".safetensors").size()) + ".done";
}

// The step of "step-000123", or -1.
std::int64_t step_of(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0) return -1;
  std::int64_t n = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || n > (1ll << 50)) return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// Another process's marker: its file's size and sha256, once it is there.
result<std::optional<file_digest>> read_marker(const std::string& tmp, int process) {
  const std::string path = tmp + "/" + marker_name(process);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::optional<file_digest>{};
  std::error_code ec;
  if (fs::file_size(path, ec) > 4096) return io(path, "is not a valid marker (too large)");
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("sha256") || !j["sha256"].is_string() || !j.contains("bytes") ||
      !j["bytes"].is_number_unsigned())
    return io(path, "is not a valid marker");
  file_digest d;
  d.name = process_file_name(process);
  d.sha256 = j["sha256"].get<std::string>();
  d.bytes = j["bytes"].get<std::uint64_t>();
  return std::optional<file_digest>{d};
}

}  // namespace

std::string step_dir_name(std::int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return name;
}

result<written> save(const store_settings& s, const contents& c, int process) {
  const auto started = std::chrono::steady_clock::now();
  const std::string final_dir = s.dir + "/" + step_dir_name(c.step);
  const std::string tmp = s.dir + "/.tmp-" + step_dir_name(c.step);
  // the writers: the processes that own a primary piece (with replicated data parallelism only
  // the first; after a lost process, among the ones that remain)
  std::vector<bool> writes(static_cast<std::size_t>(c.processes), false);
  for (const auto& l : c.layouts)
    if (l.primary) writes[static_cast<std::size_t>(c.owner[static_cast<std::size_t>(l.rank)])] = true;
  const int first = s.first;  // the process that assembles the checkpoint
  if (process != first && !writes[static_cast<std::size_t>(process)]) {
    written nothing;
    nothing.step = c.step;
    return nothing;  // no piece of its own to store
  }
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) return io(tmp, "cannot create: " + ec.message());
  auto fail = [&](const error& e) -> result<written> {
    if (process == first) fs::remove_all(tmp, ec);  // the previous checkpoints stay as they were
    return e;
  };
  auto digest = write_process_file(tmp, c, process, s.progress);
  if (!digest) return fail(digest.error());
  written w;
  w.step = c.step;
  w.bytes = static_cast<std::uint64_t>(fs::file_size(tmp + "/" + process_file_name(process), ec));
  if (process != first) {
    nlohmann::json marker = {{"sha256", *digest}, {"bytes", w.bytes}};
    if (auto st = write_small_file(tmp + "/" + marker_name(process), marker.dump()); !st) return st.error();
    w.path = tmp;
    w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return w;
  }
  // the first process: every other writer's file, then the manifest, then the rename
  std::vector<file_digest> files{{process_file_name(first), w.bytes, *digest}};
  const auto deadline = started + s.timeout;
  for (int p = 0; p < c.processes; ++p) {
    if (p == first || !writes[static_cast<std::size_t>(p)]) continue;
    for (;;) {
      auto m = read_marker(tmp, p);
      if (!m) return fail(m.error());
      if (*m) {
        files.push_back(**m);
        break;
      }
      if (s.cancelled && s.cancelled->load())
        return fail(make_error(errc::closed, "checkpoint at step " + std::to_string(c.step) +
                                                 ": the run ended before process " + std::to_string(p) +
                                                 " wrote its file"));
      if (std::chrono::steady_clock::now() > deadline)
        return fail(make_error(errc::timeout, "checkpoint at step " + std::to_string(c.step) + ": process " +
                                                  std::to_string(p) + "'s file is not there after " +
                                                  std::to_string(s.timeout.count()) + " ms"));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the writer's own thread, never an actor's
    }
  }
  if (auto st = write_manifest(tmp, c, files); !st) return fail(st.error());
  for (int p = 0; p < c.processes; ++p)
    if (p != first) fs::remove(tmp + "/" + marker_name(p), ec);
  if (auto st = sync_directory(tmp); !st) return fail(st.error());
  if (fs::exists(final_dir)) {  // a step written again after a resume from an older checkpoint
    const std::string old = s.dir + "/.old-" + step_dir_name(c.step);
    fs::remove_all(old, ec);
    fs::rename(final_dir, old, ec);
    if (ec) return fail(io(final_dir, "cannot replace: " + ec.message()));
    fs::remove_all(old, ec);
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) return fail(io(final_dir, "rename failed: " + ec.message()));
  if (auto st = sync_directory(s.dir); !st) return st.error();
  if (auto st = write_small_file(s.dir + "/latest", step_dir_name(c.step) + "\n"); !st) return st.error();
  if (auto st = sync_directory(s.dir); !st) return st.error();
  const auto all = list(s.dir);
  for (std::size_t i = static_cast<std::size_t>(std::max(1, s.keep)); i < all.size(); ++i) fs::remove_all(all[i], ec);
  w.path = final_dir;
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return w;
}

void remove_unfinished(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp-step-", 0) == 0 || name.rfind(".old-step-", 0) == 0) fs::remove_all(e.path(), ec);
  }
}

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_directory(ec)) found.push_back({step, e.path().string()});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

newest find_newest(const std::string& dir, const progress_fn& progress) {
  newest out;
  for (const auto& path : list(dir)) {
    auto ck = open(path, progress);
    if (ck) {
      out.ck = std::move(*ck);
      return out;
    }
    out.refused.push_back(ck.error().message);
  }
  return out;
}

}  // namespace cohort::actors::checkpoint
