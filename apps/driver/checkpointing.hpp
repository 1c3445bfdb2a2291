// The --checkpoint.* and --init.from options of every app: where a run starts (the newest
// checkpoint that verifies, a given one, an exported model, or the model's initialisation),
// the runtime's checkpoint settings, and the export of the trained parameters as one plain
// safetensors file. Internal to the driver (app.hpp registers the options).
//
//   option_set opts("mlp", "Trains a multi-layer perceptron.");
//   checkpoint_options ck;
//   ck.add_to(opts);                           // --checkpoint.dir=ck --checkpoint.every=10 ...
//   if (auto r = opts.parse({"--checkpoint.dir=ck", "--checkpoint.every=10"}); !r) return r.error();
//   if (auto st = ck.finish(); !st) return st;  // a bad value, named: exit 2
//   auto start = find_start(ck, /*steps=*/100, /*quiet=*/false);   // resume=auto: the newest that verifies
//   if (!start) return start.error();
//   actors::run_options o;
//   set_checkpointing(ck, *start, o);          // the runtime writes, and starts from the checkpoint
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "actors/checkpoint_store.hpp"
#include "actors/runtime.hpp"
#include "apps/driver/options.hpp"
#include "graph/init.hpp"

namespace cohort::apps {

struct checkpoint_options {
  std::string dir;
  std::int64_t every = 0;  // steps; 0: off
  std::int64_t keep = 3;
  std::string resume = "auto";  // auto, none or a checkpoint directory
  std::string on_error = "warn";
  std::string export_file;  // --checkpoint.export
  std::string init_from;    // --init.from

  void add_to(option_set& opts);
  /// Errors (exit 2): every without dir, keep < 1, on-error not warn|stop, a negative every.
  status finish() const;
  bool resumes() const { return resume != "none" && (resume != "auto" || !dir.empty()); }
};

/// Where a run starts.
struct start_point {
  std::optional<actors::checkpoint::opened> checkpoint;  // resume from it
  std::string init_from;                                 // or start the model from this file
  std::int64_t first_step = 0;
};

/// resume=auto: the newest checkpoint in dir that verifies (each newer one refused is named on
/// stderr), none when dir has none; an explicit path must verify. --init.from when there is
/// nothing to resume. Errors: an explicit checkpoint that does not verify (io_error, exit 2),
/// one that has done all `steps`.
result<start_point> find_start(const checkpoint_options& o, std::int64_t steps, bool quiet);

/// The runtime's checkpoint settings and, from `start`, its first step and initial pieces.
void set_checkpointing(const checkpoint_options& o, const start_point& start, actors::run_options& r);

/// The parameters of `path`: an exported safetensors file, or a checkpoint directory (which
/// must verify; its optimizer state is left out). Errors name the file and the fault.
result<parameter_store> load_parameters(const std::string& path);

/// The trained parameters as one safetensors file, full tensors under the model's names.
status export_parameters(const std::string& path, const parameter_store& params);

}  // namespace cohort::apps
