// A checkpoint's contents: which process file holds which box of which tensor (parameters and
// their optimizer state), written from any plan's pieces and loaded into any other plan's.
// Each process writes one safetensors file with the boxes of its primary pieces (every
// element stored once across data-parallel and tensor-parallel replicas); the manifest
// (manifest.json) records the format version, the model's fingerprint, the plan, the step,
// the data cursor and seed, the optimizer, for every tensor its boxes (file, tensor name,
// offsets in the global tensor, shape), and every file's size and sha256. Loading checks all
// of it before a byte is used and copies, for each piece of the new plan, only the boxes that
// overlap it. The directory handling (atomic writes, `latest`, pruning): checkpoint_store.hpp.
//
//   auto compiled = compile(tiny_mlp, {.dp = 2, .shard_params = true}, /*batch=*/64);
//   if (!compiled) return compiled.error();
//   auto layouts = piece_layouts(*compiled);
//   if (!layouts) return layouts.error();
//   checkpoint::contents c;
//   c.step = 10;  c.layouts = *layouts;  c.owner = {0, 0};  c.processes = 1;
//   c.optimizer = sgd_config{.lr = 0.1f, .momentum = 0.9f};
//   for (const piece_layout& l : *layouts) c.states.push_back(empty_piece(l.size, 1, 10));
//   if (auto st = checkpoint::write_process_file("ck/step-000010", c, /*process=*/0); !st) return st.error();
//   auto digests = checkpoint::file_digests("ck/step-000010", /*processes=*/1);
//   if (!digests) return digests.error();
//   if (auto st = checkpoint::write_manifest("ck/step-000010", c, *digests); !st) return st;
//   auto found = checkpoint::open("ck/step-000010");          // every file's hash, header and box checked
//   if (!found) return found.error();
//   auto pieces = checkpoint::load_pieces(*found, *layouts, {true, true}, /*slots=*/1);   // any plan's layouts
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "actors/safetensors.hpp"
#include "actors/state_layout.hpp"
#include "graph/optimizer.hpp"
#include "graph/progress.hpp"
#include "planner/plan.hpp"

#include <nlohmann/json.hpp>

namespace cohort::actors::checkpoint {

constexpr int format_version = 1;

/// One box of a tensor: an offset and an extent per dimension.
struct box {
  std::vector<std::int64_t> offset, extent;
  std::int64_t numel() const;
  friend bool operator==(const box&, const box&) = default;
};

/// Boxes that together hold exactly the elements `r` of a tensor shaped `whole` (few: a
/// tensor-parallel shard is one box, a ZeRO piece's range at most three per shard).
std::vector<box> boxes_of(const shape& whole, const runs& r);

/// The names of an optimizer's state tensors: "momentum" for SGD with momentum, "adam_m" and
/// "adam_v" for AdamW, none for plain SGD. A parameter's state tensor is "<param>.<slot>".
std::vector<std::string> slot_names(const optimizer_config& o);

/// What a checkpoint is written from: the plan's pieces and the states of this process's
/// primary pieces (by rank; the others' may be empty).
struct contents {
  std::int64_t step = 0;  // steps done
  planner::parallel_plan plan;
  std::vector<std::size_t> cuts;
  std::vector<piece_layout> layouts;
  std::vector<int> owner;  // the process of each rank
  int processes = 1;
  std::vector<piece_state> states;
  optimizer_config optimizer = sgd_config{};
  std::uint64_t seed = 0;
  std::int64_t next_sample = -1;  // the data cursor: the next step's first sample (-1: step x batch)
};

/// "process-00003.safetensors".
std::string process_file_name(int process);

/// Writes `process`'s file into `dir` (flushed to the disk) and returns its sha256 (hex).
/// `progress`: the bytes written so far, of the file's tensors' bytes.
result<std::string> write_process_file(const std::string& dir, const contents& c, int process,
                                       const progress_fn& progress = {});

struct file_digest {
  std::string name;
  std::uint64_t bytes = 0;
  std::string sha256;
};
/// The size and sha256 of each of `processes` process files in `dir`.
result<std::vector<file_digest>> file_digests(const std::string& dir, int processes);

/// Writes `dir`/manifest.json (flushed) for `c` and the process files `files`.
status write_manifest(const std::string& dir, const contents& c, const std::vector<file_digest>& files);

/// One stored box of a tensor.
struct stored_box {
  std::string file, name;
  box where;
};
struct stored_tensor {
  shape whole;
  std::vector<stored_box> boxes;
};

/// A checkpoint that verified: its manifest's facts and every file's header.
struct opened {
  std::string dir;
  std::int64_t step = 0;
  std::uint64_t seed = 0;
  std::int64_t next_sample = -1;  // the data cursor (-1: not recorded, step x batch)
  nlohmann::json manifest;
  std::string optimizer;                // "sgd" or "adamw"
  std::vector<std::string> slots;       // its state tensors' names
  std::map<std::string, shape> params;  // the model's fingerprint
  std::map<std::string, stored_tensor> tensors;
  std::map<std::string, safetensors::file_header> headers;  // by file name
};

/// Reads and checks the checkpoint in `dir`: the manifest (JSON, every field, format version),
/// every file's size and sha256, its safetensors header, and that the boxes of every tensor lie
/// inside it, do not overlap, cover it, and match their file's entries. Errors (io_error) name
/// the file and what is wrong.
/// `progress`: the bytes of its files verified so far, of all of them.
result<opened> open(const std::string& dir, const progress_fn& progress = {});

/// Errors when the checkpoint's model differs from the one `layouts` come from (a parameter
/// missing, extra or of another shape, named), or its optimizer from `optimizer`.
status check_compatible(const opened& ck, const std::vector<piece_layout>& layouts, const optimizer_config& optimizer);

/// The pieces of `layouts` for the ranks where `local` is true (the others stay empty), filled
/// from the boxes that overlap them, with `slots` optimizer slots and ck.step updates.
result<std::vector<piece_state>> load_pieces(const opened& ck, const std::vector<piece_layout>& layouts,
                                             const std::vector<bool>& local, std::size_t slots);

/// Every parameter whole (values only, no optimizer state): what --init.from takes from a
/// checkpoint directory, and what an evaluation of it needs.
result<std::map<std::string, tensor>> whole_parameters(const opened& ck);

/// The pieces of `layouts` for the local ranks filled from whole tensors (an exported model:
/// --init.from), with `slots` zeroed optimizer slots and no updates. Errors: a parameter
/// missing or of another shape or dtype, named.
result<std::vector<piece_state>> pieces_from_tensors(const std::map<std::string, tensor>& whole,
                                                     const std::vector<piece_layout>& layouts,
                                                     const std::vector<bool>& local, std::size_t slots,
                                                     const std::string& origin);

}  // namespace cohort::actors::checkpoint
