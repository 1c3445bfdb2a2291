// A directory of checkpoints: DIR/step-000123/ (process files + manifest.json), written
// atomically — every process writes its file into DIR/.tmp-step-000123/ and leaves a marker
// with the file's size and sha256; the first process waits for every marker, writes the
// manifest, flushes, renames the directory into place, flushes DIR, points DIR/latest at it
// and removes all but the newest `keep`. A write that fails (a full disk) leaves the previous
// checkpoints as they were. The processes of a job share DIR (one machine, or a shared file
// system).
//
//   checkpoint::contents c;                                       // a plan's pieces: checkpoint.hpp
//   checkpoint::store_settings s;
//   s.dir = "ck";  s.keep = 3;
//   auto w = checkpoint::save(s, c, /*process=*/0);               // ck/step-000000 and ck/latest
//   if (!w) std::fprintf(stderr, "checkpoint failed: %s\n", w.error().message.c_str());
//   auto found = checkpoint::find_newest("ck");                   // the newest that verifies
//   if (found.ck) std::printf("resume at step %lld\n", static_cast<long long>(found.ck->step));
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/checkpoint.hpp"

namespace cohort::actors::checkpoint {

struct store_settings {
  std::string dir;
  int keep = 3;                              // newest checkpoints kept
  std::chrono::milliseconds timeout{60000};  // the first process's wait for the others' files
  /// Set when the run ends or fails: a wait for the others' files gives up at once.
  std::shared_ptr<const std::atomic<bool>> cancelled;
  progress_fn progress;  // bytes of this process's file written, of all of them
  int first = 0;         // the process that assembles it (the job's coordinator: 0, or its successor)
};

struct written {
  std::int64_t step = 0;
  std::string path;         // DIR/step-000123 (on the first process; the tmp directory elsewhere)
  double seconds = 0;       // this process's write, the wait for the others included
  std::uint64_t bytes = 0;  // this process's file
};

/// "step-000123".
std::string step_dir_name(std::int64_t step);

/// This process's part of writing checkpoint `c` into s.dir (see above). Errors: a file that
/// cannot be written (the path and the system's reason), another process's file not there in
/// time; the previous checkpoints are kept.
result<written> save(const store_settings& s, const contents& c, int process);

/// Removes what unfinished writes left in `dir` (the first process, before training).
void remove_unfinished(const std::string& dir);

/// The checkpoint directories in `dir`, newest step first.
std::vector<std::string> list(const std::string& dir);

struct newest {
  std::optional<opened> ck;          // none: `dir` has no checkpoint that verifies
  std::vector<std::string> refused;  // each newer one that did not, and why
};
/// --checkpoint.resume=auto: the newest checkpoint in `dir` that verifies.
/// `progress`: each candidate's verification (bytes of its files), as checkpoint::open reports it.
newest find_newest(const std::string& dir, const progress_fn& progress = {});

}  // namespace cohort::actors::checkpoint
