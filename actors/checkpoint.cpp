// Writing a plan's pieces as boxes of whole tensors, the manifest, and loading the boxes that
// overlap another plan's pieces — everything checked before it is used.
#include "actors/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <openssl/evp.h>

namespace cohort::actors::checkpoint {
namespace {

error bad(const std::string& where, const std::string& what) { return make_error(errc::io_error, where + ": " + what); }

// Two boxes side by side along exactly one dimension: the first followed by the second.
bool merge_into(box& a, const box& b) {
  int along = -1;
  for (std::size_t d = 0; d < a.offset.size(); ++d) {
    if (a.offset[d] == b.offset[d] && a.extent[d] == b.extent[d]) continue;
    if (along >= 0 || a.offset[d] + a.extent[d] != b.offset[d]) return false;
    along = static_cast<int>(d);
  }
  if (along < 0) return false;
  a.extent[static_cast<std::size_t>(along)] += b.extent[static_cast<std::size_t>(along)];
  return true;
}

std::vector<range> ranges_of(const box& b) {
  std::vector<range> out;
  for (std::size_t d = 0; d < b.offset.size(); ++d) out.push_back({b.offset[d], b.offset[d] + b.extent[d]});
  return out;
}

// "fc1.weight" for a whole tensor, "fc1.weight[0:4,3:6]" for a box of it.
std::string box_name(const std::string& tensor_name, const shape& whole, const box& b) {
  bool full = true;
  for (std::size_t d = 0; d < b.offset.size(); ++d)
    full = full && b.offset[d] == 0 && b.extent[d] == whole[static_cast<int>(d)];
  if (full) return tensor_name;
  std::string out = tensor_name + "[";
  for (std::size_t d = 0; d < b.offset.size(); ++d)
    out += (d ? "," : "") + std::to_string(b.offset[d]) + ":" + std::to_string(b.offset[d] + b.extent[d]);
  return out + "]";
}

bool is_plain_file_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos && n.find('\0') == std::string::npos;
}

// A sha256 fed piece by piece (libcrypto's EVP), its digest in hex.
class sha256 {
 public:
  sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~sha256() { EVP_MD_CTX_free(ctx_); }
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;
  void add(const void* data, std::size_t bytes) { EVP_DigestUpdate(ctx_, data, bytes); }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, digest, &len);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) out += {digits[digest[i] >> 4], digits[digest[i] & 15]};
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

// `read`: the bytes hashed so far, after each chunk.
result<std::string> sha256_of(const std::string& path, const std::function<void(std::int64_t)>& read = {}) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return bad(path, std::string("cannot open: ") + std::strerror(errno));
  sha256 h;
  std::vector<unsigned char> chunk(1 << 20);
  std::size_t n = 0;
  std::int64_t done = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), f)) > 0) {
    h.add(chunk.data(), n);
    done += static_cast<std::int64_t>(n);
    if (read) read(done);
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return bad(path, "read failed");
  return h.hex();
}

nlohmann::json optimizer_json(const optimizer_config& o) {
  if (const auto* s = std::get_if<sgd_config>(&o))
    return {{"rule", "sgd"},           {"lr", s->lr},
            {"momentum", s->momentum}, {"weight_decay", s->weight_decay},
            {"nesterov", s->nesterov}, {"slots", slot_names(o)}};
  if (const auto* g = std::get_if<adagrad_config>(&o))
    return {{"rule", "adagrad"}, {"lr", g->lr}, {"eps", g->eps}, {"slots", slot_names(o)}};
  const auto& a = std::get<adamw_config>(o);
  return {{"rule", "adamw"},       {"lr", a.lr},   {"beta1", a.beta1},
          {"beta2", a.beta2},      {"eps", a.eps}, {"weight_decay", a.weight_decay},
          {"slots", slot_names(o)}};
}

std::string optimizer_rule(const optimizer_config& o) {
  if (std::holds_alternative<adagrad_config>(o)) return "adagrad";
  return std::holds_alternative<sgd_config>(o) ? "sgd" : "adamw";
}

// Writes `text` to `path` and flushes it to the disk.
status write_durably(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return bad(path, std::string("cannot create: ") + std::strerror(errno));
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return bad(path, "write failed: " + why);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return bad(path, "fsync failed: " + why);
  }
  if (::close(fd) != 0) return bad(path, std::string("close failed: ") + std::strerror(errno));
  return {};
}

result<std::vector<std::int64_t>> int_list(const nlohmann::json& j, std::size_t size, const std::string& where) {
  if (!j.is_array() || j.size() != size)
    return bad(where, "is not a list of " + std::to_string(size) + " non-negative integers");
  std::vector<std::int64_t> out;
  for (const auto& v : j) {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() > (1ull << 48))
      return bad(where, "is not a list of " + std::to_string(size) + " non-negative integers");
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}

bool overlaps(const box& a, const box& b) {
  for (std::size_t d = 0; d < a.offset.size(); ++d)
    if (a.offset[d] + a.extent[d] <= b.offset[d] || b.offset[d] + b.extent[d] <= a.offset[d]) return false;
  return true;
}

// One parameter's state tensors in a piece: the values, then each slot.
template <class F>
void for_each_value(const piece_state& p, const std::vector<std::string>& slots, F f) {
  f(std::string(), p.values);
  for (std::size_t k = 0; k < slots.size() && k < p.slots.size(); ++k) f("." + slots[k], p.slots[k]);
}

}  // namespace

std::int64_t box::numel() const {
  std::int64_t n = 1;
  for (auto e : extent) n *= e;
  return n;
}

std::vector<box> boxes_of(const shape& whole, const runs& r) {
  std::vector<box> out;
  if (whole.rank() == 0) {
    if (run_elements(r) > 0) out.push_back({});
    return out;
  }
  const auto rank = static_cast<std::size_t>(whole.rank());
  const std::int64_t width = whole[whole.rank() - 1];
  for (const auto& run : r)
    for (std::int64_t pos = run.begin; pos < run.end;) {
      const std::int64_t len = std::min(width - pos % width, run.end - pos);
      box b;
      b.offset.assign(rank, 0);
      b.extent.assign(rank, 1);
      std::int64_t rest = pos;
      for (std::size_t d = rank; d-- > 0;) {
        b.offset[d] = rest % whole[static_cast<int>(d)];
        rest /= whole[static_cast<int>(d)];
      }
      b.extent[rank - 1] = len;
      out.push_back(std::move(b));
      // merge the newest box into the one before while they sit side by side
      while (out.size() >= 2 && merge_into(out[out.size() - 2], out.back())) out.pop_back();
      pos += len;
    }
  return out;
}

std::vector<std::string> slot_names(const optimizer_config& o) {
  if (const auto* s = std::get_if<sgd_config>(&o)) {
    if (s->momentum != 0.f) return {"momentum"};
    return {};
  }
  if (std::holds_alternative<adagrad_config>(o)) return {"adagrad_sum"};
  return {"adam_m", "adam_v"};
}

std::string process_file_name(int process) {
  char name[64];
  std::snprintf(name, sizeof name, "process-%05d.safetensors", process);
  return name;
}

result<std::string> write_process_file(const std::string& dir, const contents& c, int process,
                                       const progress_fn& progress) {
  const auto slots = slot_names(c.optimizer);
  std::vector<safetensors::named_tensor> out;
  for (const auto& layout : c.layouts) {
    const auto r = static_cast<std::size_t>(layout.rank);
    if (c.owner[r] != process || !layout.primary) continue;
    const piece_state& state = c.states[r];
    if (!state.values.defined() || state.values.numel() != layout.size || state.slots.size() < slots.size())
      return make_error(errc::invalid_argument,
                        "checkpoint: rank " + std::to_string(layout.rank) + "'s piece is missing or of the wrong size");
    for (const auto& part : layout.parts) {
      if (!part.source) continue;
      for (const box& b : boxes_of(part.whole, part.elements)) {
        const auto copies = overlap(part.elements, box_runs(part.whole, ranges_of(b)));
        for_each_value(state, slots, [&](const std::string& suffix, const tensor& piece) {
          tensor t = tensor::empty(shape(b.extent));
          for (const auto& cp : copies)
            std::copy_n(piece.data<float>() + part.offset + cp.from, cp.count, t.data<float>() + cp.to);
          out.push_back({box_name(part.name + suffix, part.whole, b), std::move(t)});
        });
      }
    }
  }
  const std::string path = dir + "/" + process_file_name(process);
  sha256 h;  // hashed as it is written: the file is not read back
  std::int64_t total = 0, done = 0;
  for (const auto& t : out) total += t.value.numel() * 4;
  if (auto st = safetensors::write_file(path, out, {{"format", "cohort"}}, /*sync=*/true,
                                        [&](const std::byte* data, std::size_t bytes) {
                                          h.add(data, bytes);
                                          done += static_cast<std::int64_t>(bytes);
                                          report_progress(progress, std::min(done, total), total);
                                        });
      !st)
    return st.error();
  return h.hex();
}

result<std::vector<file_digest>> file_digests(const std::string& dir, int processes) {
  std::vector<file_digest> out;
  for (int p = 0; p < processes; ++p) {
    file_digest d;
    d.name = process_file_name(p);
    const std::string path = dir + "/" + d.name;
    auto h = sha256_of(path);
    if (!h) return h.error();
    d.sha256 = *h;
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    d.bytes = static_cast<std::uint64_t>(f.tellg());
    out.push_back(std::move(d));
  }
  return out;
}

status write_manifest(const std::string& dir, const contents& c, const std::vector<file_digest>& files) {
  std::vector<std::string> suffixes{""};  // the values, then each optimizer slot
  for (const auto& n : slot_names(c.optimizer)) suffixes.push_back("." + n);
  nlohmann::json params = nlohmann::json::array();
  nlohmann::json tensors = nlohmann::json::object();
  std::set<std::string> seen;
  for (const auto& layout : c.layouts)
    for (const auto& part : layout.parts) {
      if (seen.insert(part.name).second) {
        params.push_back({{"name", part.name}, {"shape", part.whole.dims()}, {"dtype", "F32"}});
        for (const auto& suffix : suffixes)
          tensors[part.name + suffix] = {
              {"shape", part.whole.dims()}, {"dtype", "F32"}, {"pieces", nlohmann::json::array()}};
      }
      if (!layout.primary || !part.source) continue;
      const std::string file = process_file_name(c.owner[static_cast<std::size_t>(layout.rank)]);
      for (const box& b : boxes_of(part.whole, part.elements))
        for (const auto& suffix : suffixes)
          tensors[part.name + suffix]["pieces"].push_back({{"file", file},
                                                           {"tensor", box_name(part.name + suffix, part.whole, b)},
                                                           {"offsets", b.offset},
                                                           {"shape", b.extent}});
    }
  nlohmann::json file_list = nlohmann::json::object();
  for (const auto& f : files) file_list[f.name] = {{"bytes", f.bytes}, {"sha256", f.sha256}};
  nlohmann::json data = {{"next_step", c.step}, {"seed", c.seed}};
  if (c.next_sample >= 0) data["next_sample"] = c.next_sample;
  nlohmann::json m = {
      {"format", "cohort-checkpoint"},
      {"version", format_version},
      {"step", c.step},
      {"model", {{"parameters", params}}},
      {"plan",
       {{"dp", c.plan.dp},
        {"tp", c.plan.tp},
        {"pp", c.plan.pp},
        {"virtual_stages", c.plan.virtual_stages},
        {"micro_batches", c.plan.micro_batches},
        {"schedule", planner::to_string(c.plan.schedule)},
        {"shard_params", c.plan.shard_params},
        {"cuts", c.cuts}}},
      {"processes", c.processes},
      {"data", data},
      {"optimizer", optimizer_json(c.optimizer)},
      {"tensors", tensors},
      {"files", file_list},
  };
  return write_durably(dir + "/manifest.json", m.dump(1) + "\n");
}

result<opened> open(const std::string& dir, const progress_fn& progress) {
  opened ck;
  ck.dir = dir;
  const std::string mpath = dir + "/manifest.json";
  std::ifstream in(mpath, std::ios::binary | std::ios::ate);
  if (!in) return bad(mpath, "cannot open (missing?)");
  if (static_cast<std::uint64_t>(in.tellg()) > (64u << 20))
    return bad(mpath, "is larger than 64 MiB");  // before reading
  in.seekg(0);
  std::stringstream text;
  text << in.rdbuf();
  auto m = nlohmann::json::parse(text.str(), nullptr, false);
  if (m.is_discarded() || !m.is_object()) return bad(mpath, "is not a JSON object");
  auto field = [&](const char* name, auto is) -> result<const nlohmann::json*> {
    if (!m.contains(name) || !is(m[name])) return bad(mpath, std::string("lacks a valid '") + name + "'");
    return &m[name];
  };
  auto is_object = [](const nlohmann::json& j) { return j.is_object(); };
  auto is_count = [](const nlohmann::json& j) { return j.is_number_unsigned(); };
  auto format = field("format", [](const nlohmann::json& j) { return j.is_string(); });
  if (!format) return format.error();
  if ((*format)->get<std::string>() != "cohort-checkpoint") return bad(mpath, "is not a cohort checkpoint manifest");
  auto version = field("version", is_count);
  if (!version) return version.error();
  if ((*version)->get<int>() != format_version)
    return bad(mpath,
               "has format version " + (*version)->dump() + ", this build reads " + std::to_string(format_version));
  auto step = field("step", is_count);
  auto model = field("model", is_object);
  auto data = field("data", is_object);
  auto optimizer = field("optimizer", is_object);
  auto tensors = field("tensors", is_object);
  auto files = field("files", is_object);
  auto plan = field("plan", is_object);
  for (auto* f : {&step, &model, &data, &optimizer, &tensors, &files, &plan})
    if (!*f) return f->error();
  ck.step = (*step)->get<std::int64_t>();
  ck.manifest = m;
  const auto& d = **data;
  if (!d.contains("seed") || !d["seed"].is_number_unsigned()) return bad(mpath, "data lacks a valid 'seed'");
  ck.seed = d["seed"].get<std::uint64_t>();
  if (d.contains("next_sample")) {
    if (!d["next_sample"].is_number_unsigned()) return bad(mpath, "data's 'next_sample' is not a count");
    ck.next_sample = d["next_sample"].get<std::int64_t>();
  }
  const auto& o = **optimizer;
  if (!o.contains("rule") || !o["rule"].is_string() || !o.contains("slots") || !o["slots"].is_array())
    return bad(mpath, "optimizer lacks a valid 'rule' or 'slots'");
  ck.optimizer = o["rule"].get<std::string>();
  for (const auto& s : o["slots"]) {
    if (!s.is_string()) return bad(mpath, "optimizer slots are not strings");
    ck.slots.push_back(s.get<std::string>());
  }
  const auto& mm = **model;
  if (!mm.contains("parameters") || !mm["parameters"].is_array()) return bad(mpath, "model lacks 'parameters'");
  for (const auto& p : mm["parameters"]) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string() || !p.contains("shape") ||
        !p["shape"].is_array() || p.value("dtype", "") != "F32")
      return bad(mpath, "a model parameter lacks a name, a shape or dtype F32");
    auto dims = int_list(p["shape"], p["shape"].size(), mpath + ": parameter " + p["name"].dump() + "'s shape");
    if (!dims) return dims.error();
    if (!ck.params.emplace(p["name"].get<std::string>(), shape(*dims)).second)
      return bad(mpath, "parameter " + p["name"].dump() + " is listed twice");
  }

  // every file: a plain name, its size and sha256, then its safetensors header
  std::int64_t total_bytes = 0, verified = 0;
  for (const auto& [name, f] : (*files)->items())
    if (f.is_object() && f.contains("bytes") && f["bytes"].is_number_unsigned())
      total_bytes += static_cast<std::int64_t>(std::min<std::uint64_t>(f["bytes"].get<std::uint64_t>(), 1ull << 50));
  for (const auto& [name, f] : (*files)->items()) {
    if (!is_plain_file_name(name)) return bad(mpath, "file name '" + name + "' is not a plain file name");
    const std::string path = dir + "/" + name;
    if (!f.is_object() || !f.contains("sha256") || !f["sha256"].is_string() || !f.contains("bytes") ||
        !f["bytes"].is_number_unsigned())
      return bad(mpath, "file '" + name + "' lacks its bytes or sha256");
    std::ifstream probe(path, std::ios::binary | std::ios::ate);
    if (!probe) return bad(path, "is missing");
    const auto size = static_cast<std::uint64_t>(probe.tellg());
    if (size != f["bytes"].get<std::uint64_t>())
      return bad(path,
                 "is " + std::to_string(size) + " bytes, the manifest says " + f["bytes"].dump() + " (truncated?)");
    auto digest = sha256_of(path, [&](std::int64_t read) { report_progress(progress, verified + read, total_bytes); });
    if (!digest) return digest.error();
    verified += static_cast<std::int64_t>(size);
    if (*digest != f["sha256"].get<std::string>())
      return bad(path, "sha256 " + *digest + " differs from the manifest's (the file is corrupt)");
    auto header = safetensors::read_header(path);
    if (!header) return header.error();
    ck.headers.emplace(name, std::move(*header));
  }

  // every tensor: boxes inside it, apart, covering it, each matching its file's entry
  for (const auto& [name, t] : (*tensors)->items()) {
    const std::string where = mpath + ": tensor '" + name + "'";
    if (!t.is_object() || !t.contains("shape") || !t.contains("pieces") || !t["pieces"].is_array() ||
        t.value("dtype", "") != "F32")
      return bad(where, "lacks shape, dtype F32 or pieces");
    auto dims = int_list(t["shape"], t["shape"].size(), where + " shape");
    if (!dims) return dims.error();
    stored_tensor st;
    st.whole = shape(*dims);
    std::int64_t covered = 0;
    for (const auto& p : t["pieces"]) {
      if (!p.is_object() || !p.contains("file") || !p["file"].is_string() || !p.contains("tensor") ||
          !p["tensor"].is_string() || !p.contains("offsets") || !p.contains("shape"))
        return bad(where, "a piece lacks file, tensor, offsets or shape");
      stored_box b;
      b.file = p["file"].get<std::string>();
      b.name = p["tensor"].get<std::string>();
      auto off = int_list(p["offsets"], dims->size(), where + " piece '" + b.name + "' offsets");
      if (!off) return off.error();
      auto ext = int_list(p["shape"], dims->size(), where + " piece '" + b.name + "' shape");
      if (!ext) return ext.error();
      b.where = {*off, *ext};
      for (std::size_t k = 0; k < dims->size(); ++k)
        if (b.where.offset[k] + b.where.extent[k] > (*dims)[k])
          return bad(where, "piece '" + b.name + "' lies outside the tensor's shape " + st.whole.to_string());
      auto h = ck.headers.find(b.file);
      if (h == ck.headers.end()) return bad(where, "piece '" + b.name + "' is in '" + b.file + "', not a listed file");
      const safetensors::entry* e = h->second.find(b.name);
      if (!e) return bad(dir + "/" + b.file, "has no tensor '" + b.name + "' (the manifest lists it)");
      if (e->type != dtype::f32 || e->dims != shape(b.where.extent))
        return bad(dir + "/" + b.file, "tensor '" + b.name + "' is " + safetensors::dtype_name(e->type) +
                                           e->dims.to_string() + ", the manifest says F32" +
                                           shape(b.where.extent).to_string());
      for (const auto& other : st.boxes)
        if (overlaps(other.where, b.where))
          return bad(where, "pieces '" + other.name + "' and '" + b.name + "' overlap");
      covered += b.where.numel();
      st.boxes.push_back(std::move(b));
    }
    if (covered != st.whole.numel())
      return bad(where, "pieces hold " + std::to_string(covered) + " of its " + std::to_string(st.whole.numel()) +
                            " elements");
    ck.tensors.emplace(name, std::move(st));
  }
  for (const auto& [name, whole] : ck.params) {
    std::vector<std::string> names{name};
    for (const auto& s : ck.slots) names.push_back(name + "." + s);
    for (const auto& n : names) {
      auto it = ck.tensors.find(n);
      if (it == ck.tensors.end()) return bad(mpath, "has no tensor '" + n + "'");
      if (it->second.whole != whole) return bad(mpath, "tensor '" + n + "' is not shaped like its parameter");
    }
  }
  return ck;
}

status check_compatible(const opened& ck, const std::vector<piece_layout>& layouts, const optimizer_config& optimizer) {
  std::map<std::string, shape> model;
  for (const auto& l : layouts)
    for (const auto& p : l.parts) model.emplace(p.name, p.whole);
  const std::string where = ck.dir + "/manifest.json";
  for (const auto& [name, whole] : model) {
    auto it = ck.params.find(name);
    if (it == ck.params.end()) return make_error(errc::invalid_argument, where + ": has no parameter '" + name + "'");
    if (it->second != whole)
      return make_error(errc::shape_mismatch, where + ": parameter '" + name + "' is " + it->second.to_string() +
                                                  ", the model's is " + whole.to_string());
  }
  for (const auto& [name, whole] : ck.params)
    if (!model.count(name))
      return make_error(errc::invalid_argument, where + ": parameter '" + name + "' is not in this model");
  if (ck.optimizer != optimizer_rule(optimizer) || ck.slots != slot_names(optimizer))
    return make_error(errc::invalid_argument,
                      where + ": its optimizer state is " + ck.optimizer + "'s (" + std::to_string(ck.slots.size()) +
                          " slots), this run's optimizer is " + optimizer_rule(optimizer) + " (" +
                          std::to_string(slot_names(optimizer).size()) +
                          " slots); to start a new optimizer from its parameters, export and use --init.from");
  return {};
}

result<std::vector<piece_state>> load_pieces(const opened& ck, const std::vector<piece_layout>& layouts,
                                             const std::vector<bool>& local, std::size_t slots) {
  if (slots != ck.slots.size())
    return make_error(errc::invalid_argument, ck.dir + ": holds " + std::to_string(ck.slots.size()) +
                                                  " optimizer slots, the run needs " + std::to_string(slots));
  std::vector<piece_state> out(layouts.size());
  std::map<std::string, tensor> read;  // each stored box read once
  auto box_data = [&](const stored_box& b) -> result<const tensor*> {
    const std::string key = b.file + "/" + b.name;
    auto it = read.find(key);
    if (it != read.end()) return &it->second;
    const auto& h = ck.headers.at(b.file);
    auto t = safetensors::read_tensor(ck.dir + "/" + b.file, h, *h.find(b.name));
    if (!t) return t.error();
    return &read.emplace(key, std::move(*t)).first->second;
  };
  for (std::size_t r = 0; r < layouts.size(); ++r) {
    if (!local[r]) continue;
    const auto& layout = layouts[r];
    piece_state p = empty_piece(layout.size, slots, ck.step);
    for (const auto& part : layout.parts) {
      std::vector<std::pair<std::string, tensor*>> targets{{part.name, &p.values}};
      for (std::size_t k = 0; k < slots; ++k) targets.push_back({part.name + "." + ck.slots[k], &p.slots[k]});
      for (auto& [name, target] : targets) {
        auto it = ck.tensors.find(name);
        if (it == ck.tensors.end())
          return make_error(errc::invalid_argument, ck.dir + ": has no tensor '" + name + "'");
        std::int64_t filled = 0;
        for (const auto& b : it->second.boxes) {
          const auto copies = overlap(box_runs(it->second.whole, ranges_of(b.where)), part.elements);
          if (copies.empty()) continue;
          auto src = box_data(b);
          if (!src) return src.error();
          for (const auto& c : copies) {
            std::copy_n((*src)->data<float>() + c.from, c.count, target->data<float>() + part.offset + c.to);
            filled += c.count;
          }
        }
        if (filled != run_elements(part.elements))
          return make_error(errc::io_error, ck.dir + ": tensor '" + name + "' does not cover rank " +
                                                std::to_string(layout.rank) + "'s piece");
      }
    }
    out[r] = std::move(p);
  }
  return out;
}

result<std::map<std::string, tensor>> whole_parameters(const opened& ck) {
  std::map<std::string, tensor> out;
  for (const auto& [name, whole] : ck.params) {
    const stored_tensor& st = ck.tensors.at(name);  // open() checked every parameter has its tensor
    tensor t = tensor::empty(whole);
    const runs all{{0, whole.numel()}};
    for (const auto& b : st.boxes) {
      const auto& h = ck.headers.at(b.file);
      auto src = safetensors::read_tensor(ck.dir + "/" + b.file, h, *h.find(b.name));
      if (!src) return src.error();
      for (const auto& c : overlap(box_runs(whole, ranges_of(b.where)), all))
        std::copy_n(src->data<float>() + c.from, c.count, t.data<float>() + c.to);
    }
    out.emplace(name, std::move(t));
  }
  return out;
}

result<std::vector<piece_state>> pieces_from_tensors(const std::map<std::string, tensor>& whole,
                                                     const std::vector<piece_layout>& layouts,
                                                     const std::vector<bool>& local, std::size_t slots,
                                                     const std::string& origin) {
  std::set<std::string> model;
  for (const auto& l : layouts)
    for (const auto& part : l.parts) {
      model.insert(part.name);
      auto it = whole.find(part.name);
      if (it == whole.end()) return make_error(errc::invalid_argument, origin + ": has no tensor '" + part.name + "'");
      if (it->second.type() != dtype::f32 || it->second.shape() != part.whole)
        return make_error(errc::shape_mismatch, origin + ": tensor '" + part.name + "' is " +
                                                    safetensors::dtype_name(it->second.type()) +
                                                    it->second.shape().to_string() + ", the model's parameter is F32" +
                                                    part.whole.to_string());
    }
  for (const auto& [name, t] : whole)
    if (!model.count(name))
      return make_error(errc::invalid_argument, origin + ": tensor '" + name + "' is not a parameter of this model");
  std::vector<piece_state> out(layouts.size());
  for (std::size_t r = 0; r < layouts.size(); ++r) {
    if (!local[r]) continue;
    piece_state p = empty_piece(layouts[r].size, slots, 0);
    for (const auto& part : layouts[r].parts) {
      const tensor src = whole.at(part.name).contiguous();
      std::int64_t at = part.offset;
      for (const auto& run : part.elements) {
        std::copy_n(src.data<float>() + run.begin, run.size(), p.values.data<float>() + at);
        at += run.size();
      }
    }
    out[r] = std::move(p);
  }
  return out;
}

}  // namespace cohort::actors::checkpoint
