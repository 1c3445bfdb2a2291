// The safetensors file format (github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]},
// optional "__metadata__": {string: string}}), then the tensors' bytes. What cohort writes any
// safetensors reader loads; what it reads is validated before anything is allocated: the
// header's length against the file, its JSON, every dtype, shape and offset, and that the
// tensors fill the data buffer exactly (no hole, no overlap) — the format's published rules.
// A file is data, never code.
//
//   std::vector<safetensors::named_tensor> out;
//   out.push_back({"fc1.weight", tensor::full({4, 3}, 0.5f)});
//   out.push_back({"fc1.bias", tensor::zeros({3})});
//   if (auto st = safetensors::write_file("model.safetensors", out, {{"format", "pt"}}, /*sync=*/true); !st) return st;
//   auto header = safetensors::read_header("model.safetensors");   // validated against the file's size
//   if (!header) return header.error();                            // names the file and what is wrong
//   auto w = safetensors::read_tensor("model.safetensors", *header, *header->find("fc1.weight"));
//   if (!w) return w.error();
//   assert(w->shape() == shape({4, 3}) && w->data<float>()[0] == 0.5f);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/error.hpp"
#include "graph/tensor.hpp"

namespace cohort::actors::safetensors {

/// The longest header a reader accepts (the reference implementation's bound).
constexpr std::uint64_t max_header_bytes = 100'000'000;

/// One tensor of a file: its bytes are [begin, end) of the data buffer.
struct entry {
  std::string name;
  dtype type = dtype::f32;
  shape dims;
  std::uint64_t begin = 0, end = 0;
};

struct file_header {
  std::vector<entry> tensors;  // in the order of their data
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  // 8 + the header's length
  std::uint64_t file_size = 0;

  const entry* find(const std::string& name) const;
};

struct named_tensor {
  std::string name;
  tensor value;  // any strides; written row-major
};

/// The format's name of a dtype ("F32", "I32", "BF16", "F16").
const char* dtype_name(dtype t);

/// Every byte written, in file order (e.g. to hash the file as it is written).
using byte_observer = std::function<void(const std::byte* data, std::size_t bytes)>;

/// Writes `tensors` (unique names) to `path`, the header padded with spaces to 8 bytes. With
/// `sync` the file is flushed to the disk before this returns. Errors: a duplicate or empty
/// name, a file that cannot be written (the path and the system's reason).
status write_file(const std::string& path, const std::vector<named_tensor>& tensors,
                  const std::map<std::string, std::string>& metadata, bool sync, const byte_observer& written = {});

/// The header of `path`, checked against the file. Errors (io_error, the file named): shorter
/// than 8 bytes, a header longer than the file or max_header_bytes, not a JSON object, an entry
/// without dtype/shape/data_offsets, an unknown dtype, a negative or overflowing shape, offsets
/// that disagree with the shape, overlap, leave a hole or run past the file.
result<file_header> read_header(const std::string& path);

/// The bytes of `e` (an entry of `h`, the header of `path`) as a tensor.
result<tensor> read_tensor(const std::string& path, const file_header& h, const entry& e);

/// Every tensor of `path`, by name.
result<std::map<std::string, tensor>> read_file(const std::string& path);

}  // namespace cohort::actors::safetensors
