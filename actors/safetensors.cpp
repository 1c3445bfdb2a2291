// Reading and writing safetensors files with POSIX calls (pread/pwrite, fsync) and the header
// as JSON (nlohmann), validated before any tensor is allocated.
#include "actors/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace cohort::actors::safetensors {
namespace {

error file_error(const std::string& path, const std::string& what) {
  return make_error(errc::io_error, path + ": " + what);
}

error system_error(const std::string& path, const std::string& what) {
  return file_error(path, what + ": " + std::strerror(errno));
}

// A file descriptor closed on every path.
struct descriptor {
  int fd = -1;
  ~descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

status write_all(int fd, const std::byte* data, std::size_t bytes, const std::string& path) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return system_error(path, "write failed");
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return {};
}

status read_at(int fd, std::byte* data, std::size_t bytes, std::uint64_t offset, const std::string& path) {
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, data, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return system_error(path, "read failed");
    if (n == 0) return file_error(path, "ends early (truncated?)");
    data += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

result<dtype> parse_dtype(const std::string& name) {
  if (name == "F32") return dtype::f32;
  if (name == "I32") return dtype::i32;
  if (name == "BF16") return dtype::bf16;
  if (name == "F16") return dtype::f16;
  return make_error(errc::unsupported, "dtype '" + name + "' (cohort reads F32, I32, BF16, F16)");
}

// One header entry, validated on its own (the buffer's layout is checked once all are read).
result<entry> parse_entry(const std::string& name, const nlohmann::json& v, const std::string& path) {
  const std::string where = "tensor '" + name + "'";
  if (name.empty()) return file_error(path, "a tensor with an empty name");
  if (!v.is_object()) return file_error(path, where + " is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) return file_error(path, where + " has no '" + key + "'");
  if (v.size() != 3) return file_error(path, where + " has fields other than dtype, shape and data_offsets");
  if (!v["dtype"].is_string()) return file_error(path, where + ": dtype is not a string");
  auto t = parse_dtype(v["dtype"].get<std::string>());
  if (!t) return file_error(path, where + ": " + t.error().message);
  entry e;
  e.name = name;
  e.type = *t;
  const auto& dims = v["shape"];
  if (!dims.is_array()) return file_error(path, where + ": shape is not an array");
  std::uint64_t elements = 1;
  std::vector<std::int64_t> sizes;
  for (const auto& d : dims) {
    if (!d.is_number_unsigned()) return file_error(path, where + ": a shape entry is not a non-negative integer");
    const auto n = d.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        (n != 0 && elements > std::numeric_limits<std::uint64_t>::max() / n / 8))
      return file_error(path, where + ": shape " + dims.dump() + " overflows");
    elements *= n;
    sizes.push_back(static_cast<std::int64_t>(n));
  }
  e.dims = shape(std::move(sizes));
  const auto& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    return file_error(path, where + ": data_offsets is not [begin, end] of non-negative integers");
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  if (e.end < e.begin) return file_error(path, where + ": data_offsets end before they begin");
  if (e.end - e.begin != elements * size_of(e.type))
    return file_error(path, where + ": data_offsets hold " + std::to_string(e.end - e.begin) + " bytes, shape " +
                                dims.dump() + " of " + v["dtype"].get<std::string>() + " needs " +
                                std::to_string(elements * size_of(e.type)));
  return e;
}

}  // namespace

const entry* file_header::find(const std::string& name) const {
  for (const auto& e : tensors)
    if (e.name == name) return &e;
  return nullptr;
}

const char* dtype_name(dtype t) {
  switch (t) {
    case dtype::f32:
      return "F32";
    case dtype::i32:
      return "I32";
    case dtype::bf16:
      return "BF16";
    case dtype::f16:
      return "F16";
  }
  return "?";
}

status write_file(const std::string& path, const std::vector<named_tensor>& tensors,
                  const std::map<std::string, std::string>& metadata, bool sync, const byte_observer& written) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  std::vector<tensor> packed;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return make_error(errc::invalid_argument, path + ": a tensor may not be named '" + t.name + "'");
    if (!names.insert(t.name).second)
      return make_error(errc::invalid_argument, path + ": two tensors named '" + t.name + "'");
    packed.push_back(t.value.contiguous());
    const std::uint64_t bytes = static_cast<std::uint64_t>(t.value.numel()) * size_of(t.value.type());
    header[t.name] = {{"dtype", dtype_name(t.value.type())},
                      {"shape", t.value.shape().dims()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::byte length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);

  descriptor f;
  f.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f.fd < 0) return system_error(path, "cannot create");
  auto put = [&](const std::byte* data, std::size_t bytes) {
    if (written) written(data, bytes);
    return write_all(f.fd, data, bytes, path);
  };
  if (auto st = put(length, 8); !st) return st;
  if (auto st = put(reinterpret_cast<const std::byte*>(text.data()), text.size()); !st) return st;
  for (const auto& t : packed)
    if (auto st = put(t.data<std::byte>(), static_cast<std::size_t>(t.numel()) * size_of(t.type())); !st) return st;
  if (sync && ::fsync(f.fd) != 0) return system_error(path, "fsync failed");
  const int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) return system_error(path, "close failed");
  return {};
}

result<file_header> read_header(const std::string& path) {
  descriptor f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return system_error(path, "cannot open");
  struct stat info {};
  if (::fstat(f.fd, &info) != 0) return system_error(path, "cannot stat");
  file_header h;
  h.file_size = static_cast<std::uint64_t>(info.st_size);
  if (h.file_size < 8) return file_error(path, "is " + std::to_string(h.file_size) + " bytes, shorter than a header");
  std::byte length[8];
  if (auto st = read_at(f.fd, length, 8, 0, path); !st) return st.error();
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(length[i]) << (8 * i);
  if (n > max_header_bytes) return file_error(path, "header of " + std::to_string(n) + " bytes is over the limit");
  if (n > h.file_size - 8)
    return file_error(path, "header of " + std::to_string(n) + " bytes is longer than the file (" +
                                std::to_string(h.file_size) + " bytes)");
  std::string text(static_cast<std::size_t>(n), '\0');
  if (auto st = read_at(f.fd, reinterpret_cast<std::byte*>(text.data()), text.size(), 8, path); !st) return st.error();
  h.data_start = 8 + n;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return file_error(path, "header is not a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return file_error(path, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) return file_error(path, "__metadata__ '" + k + "' is not a string");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    auto e = parse_entry(key, value, path);
    if (!e) return e.error();
    h.tensors.push_back(std::move(*e));
  }
  // the tensors must fill the data buffer exactly: sorted by offset, each begins where the last ended
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const entry& a, const entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t at = 0;
  for (const auto& e : h.tensors) {
    if (e.begin < at) return file_error(path, "tensor '" + e.name + "' overlaps the one before it");
    if (e.begin > at) return file_error(path, "a hole in the data before tensor '" + e.name + "'");
    at = e.end;
  }
  const std::uint64_t buffer = h.file_size - h.data_start;
  if (at > buffer)
    return file_error(path, "tensors need " + std::to_string(at) + " bytes of data, the file holds " +
                                std::to_string(buffer) + " (truncated?)");
  if (at < buffer) return file_error(path, std::to_string(buffer - at) + " bytes after the last tensor");
  return h;
}

result<tensor> read_tensor(const std::string& path, const file_header& h, const entry& e) {
  if (e.end < e.begin || h.data_start + e.end > h.file_size)
    return file_error(path, "tensor '" + e.name + "' lies outside the file");
  descriptor f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return system_error(path, "cannot open");
  struct stat info {};
  if (::fstat(f.fd, &info) != 0) return system_error(path, "cannot stat");
  if (static_cast<std::uint64_t>(info.st_size) != h.file_size)
    return file_error(path, "changed size since its header was read");
  tensor t = tensor::empty(e.dims, e.type);
  if (auto st =
          read_at(f.fd, t.data<std::byte>(), static_cast<std::size_t>(e.end - e.begin), h.data_start + e.begin, path);
      !st)
    return st.error();
  return t;
}

result<std::map<std::string, tensor>> read_file(const std::string& path) {
  auto h = read_header(path);
  if (!h) return h.error();
  std::map<std::string, tensor> out;
  for (const auto& e : h->tensors) {
    auto t = read_tensor(path, *h, e);
    if (!t) return t.error();
    out.emplace(e.name, std::move(*t));
  }
  return out;
}

}  // namespace cohort::actors::safetensors
