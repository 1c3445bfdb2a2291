// Loaders: sklearn digits CSV (gzip), idx image/label files (raw or gzip), seeded synth.
#include "apps/data/datasets.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>

#include "graph/random.hpp"

namespace cohort::apps {
namespace {

const char* fetch_hint = " (run scripts/fetch-data.sh; add --all for MNIST)";

bool exists(const std::string& path) { return std::ifstream(path).good(); }

// Reads a file that may be gzip-compressed (zlib reads plain files transparently).
result<std::string> read_maybe_gzip(const std::string& path) {
  if (!exists(path)) return make_error(errc::not_found, "missing data file " + path + fetch_hint);
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return make_error(errc::io_error, "cannot open " + path);
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  std::string out;
  char buf[1 << 16];
  while (true) {
    int n = gzread(f, buf, sizeof(buf));
    if (n < 0) return make_error(errc::io_error, "corrupt compressed file " + path);
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

std::uint32_t big_endian_u32(const std::string& s, std::size_t at) {
  auto b = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

// idx format: magic 0x0000 08 NDIM, then NDIM big-endian u32 extents, then u8 data.
result<std::pair<std::vector<std::int64_t>, std::string>> read_idx(const std::string& path) {
  auto raw = read_maybe_gzip(path);
  if (!raw) return raw.error();
  const std::string& s = *raw;
  if (s.size() < 4 || s[0] != 0 || s[1] != 0 || static_cast<unsigned char>(s[2]) != 0x08)
    return make_error(errc::io_error, path + ": not an idx file of unsigned bytes");
  int ndim = static_cast<unsigned char>(s[3]);
  if (ndim < 1 || ndim > 4 || s.size() < 4 + 4 * static_cast<std::size_t>(ndim))
    return make_error(errc::io_error, path + ": bad idx header");
  std::vector<std::int64_t> dims;
  std::int64_t n = 1;
  for (int i = 0; i < ndim; ++i) {
    dims.push_back(big_endian_u32(s, 4 + 4 * static_cast<std::size_t>(i)));
    n *= dims.back();
  }
  std::size_t header = 4 + 4 * static_cast<std::size_t>(ndim);
  if (s.size() != header + static_cast<std::size_t>(n))
    return make_error(errc::io_error, path + ": size " + std::to_string(s.size()) + " does not match its header");
  return std::make_pair(dims, s.substr(header));
}

// Images [N, H, W] u8 and labels [N] u8 into a labeled set, pixels scaled to [0,1].
result<labeled_set> read_idx_pair(const std::string& images, const std::string& labels) {
  auto im = read_idx(images);
  if (!im) return im.error();
  auto lb = read_idx(labels);
  if (!lb) return lb.error();
  std::int64_t n = im->first[0];
  if (lb->first.size() != 1 || lb->first[0] != n)
    return make_error(errc::io_error, labels + ": label count does not match " + images);
  std::int64_t features = static_cast<std::int64_t>(im->second.size()) / std::max<std::int64_t>(n, 1);
  labeled_set out{tensor::empty({n, features}), tensor::empty({n}, dtype::i32)};
  for (std::int64_t i = 0; i < n * features; ++i)
    out.x.data<float>()[i] = static_cast<unsigned char>(im->second[static_cast<std::size_t>(i)]) / 255.f;
  for (std::int64_t i = 0; i < n; ++i) {
    int l = static_cast<unsigned char>(lb->second[static_cast<std::size_t>(i)]);
    if (l > 9) return make_error(errc::io_error, labels + ": label " + std::to_string(l) + " out of range");
    out.y.data<std::int32_t>()[i] = l;
  }
  return out;
}

// Rows [begin, end) of a labeled set, copied.
labeled_set rows(const labeled_set& s, std::int64_t begin, std::int64_t end) {
  return {s.x.slice(0, begin, end).clone(), s.y.slice(0, begin, end).clone()};
}

labeled_set gather(const labeled_set& s, const std::vector<std::int64_t>& idx) {
  std::int64_t f = s.x.shape()[1];
  auto n = static_cast<std::int64_t>(idx.size());
  labeled_set out{tensor::empty({n, f}), tensor::empty({n}, dtype::i32)};
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(out.x.data<float>() + i * f, s.x.data<float>() + idx[static_cast<std::size_t>(i)] * f,
                static_cast<std::size_t>(f) * sizeof(float));
    out.y.data<std::int32_t>()[i] = s.y.data<std::int32_t>()[idx[static_cast<std::size_t>(i)]];
  }
  return out;
}

result<classification_data> load_digits(const std::string& dir) {
  std::string path = dir + "/sklearn/digits.csv.gz";
  auto raw = read_maybe_gzip(path);
  if (!raw) return raw.error();
  std::vector<float> xs;
  std::vector<std::int32_t> ys;
  std::istringstream lines(*raw);
  std::string line;
  int row = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++row;
    std::istringstream cells(line);
    std::string cell;
    std::vector<double> values;
    while (std::getline(cells, cell, ',')) values.push_back(std::strtod(cell.c_str(), nullptr));
    if (values.size() != 65)
      return make_error(errc::io_error, path + ": row " + std::to_string(row) + " has " +
                                            std::to_string(values.size()) + " columns, expected 65");
    for (int j = 0; j < 64; ++j) xs.push_back(static_cast<float>(values[static_cast<std::size_t>(j)] / 16.0));
    ys.push_back(static_cast<std::int32_t>(values[64]));
  }
  auto n = static_cast<std::int64_t>(ys.size());
  labeled_set all{tensor::from({n, 64}, xs), tensor::from_ints({n}, ys)};
  // A fixed split, independent of the training seed: shuffle with seed 1234, 20% test.
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  rng r(1234);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(order[static_cast<std::size_t>(i)], order[r.below(static_cast<std::uint64_t>(i + 1))]);
  std::int64_t n_test = n / 5;
  classification_data d;
  d.name = "digits";
  d.test = gather(all, {order.begin(), order.begin() + n_test});
  d.train = gather(all, {order.begin() + n_test, order.end()});
  d.features = 64;
  d.classes = 10;
  d.note = "digits: " + std::to_string(d.train.size()) + " train / " + std::to_string(d.test.size()) +
           " held-out test (fixed split)";
  return d;
}

result<classification_data> load_idx_set(const std::string& name, const std::string& dir) {
  std::string sub = dir + "/" + (name == "fashion" ? "fashion-mnist" : "mnist") + "/";
  std::string ext = name == "fashion" ? ".gz" : "";
  auto test = read_idx_pair(sub + "t10k-images-idx3-ubyte" + ext, sub + "t10k-labels-idx1-ubyte" + ext);
  if (!test) return test.error();
  classification_data d;
  d.name = name;
  d.features = test->x.shape()[1];
  d.classes = 10;
  std::string train_images = sub + "train-images-idx3-ubyte" + ext;
  if (exists(train_images)) {
    auto train = read_idx_pair(train_images, sub + "train-labels-idx1-ubyte" + ext);
    if (!train) return train.error();
    d.train = std::move(*train);
    d.test = std::move(*test);
    d.note = name + ": " + std::to_string(d.train.size()) + " train / " + std::to_string(d.test.size()) + " test";
  } else {
    d.train = rows(*test, 0, 8000);
    d.test = rows(*test, 8000, test->size());
    d.note = name +
             ": full training set not found (scripts/fetch-data.sh --all); training on t10k[0,8000), testing on "
             "t10k[8000,10000)";
  }
  return d;
}

classification_data make_synth(std::uint64_t seed, std::int64_t features, std::int64_t classes) {
  const std::int64_t n = 8192;
  rng r(seed);
  tensor x = tensor::empty({n, features});
  for (std::int64_t i = 0; i < n * features; ++i) x.data<float>()[i] = r.normal();
  std::vector<float> w(static_cast<std::size_t>(features * classes));
  for (auto& v : w) v = r.normal();
  tensor y = tensor::empty({n}, dtype::i32);
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<double> logits(static_cast<std::size_t>(classes), 0.0);
    for (std::int64_t k = 0; k < features; ++k) {
      double xv = x.data<float>()[i * features + k];
      for (std::int64_t c = 0; c < classes; ++c)
        logits[static_cast<std::size_t>(c)] += xv * w[static_cast<std::size_t>(k * classes + c)];
    }
    y.data<std::int32_t>()[i] =
        static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  classification_data d;
  d.name = "synth";
  d.train = {x, y};
  d.features = features;
  d.classes = classes;
  d.note = "synth: 8192 samples, labels from a seeded linear teacher (no test split)";
  return d;
}

}  // namespace

result<classification_data> load_classification(const std::string& name, const std::string& data_dir,
                                                std::uint64_t seed, std::int64_t synth_features,
                                                std::int64_t synth_classes) {
  if (name == "digits") return load_digits(data_dir);
  if (name == "fashion" || name == "mnist") return load_idx_set(name, data_dir);
  if (name == "synth") return make_synth(seed, synth_features, synth_classes);
  return make_error(errc::invalid_argument, "--data.name must be digits, fashion, mnist or synth, got '" + name + "'");
}

result<std::vector<std::uint8_t>> load_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(errc::not_found, "cannot open text file '" + path + "'");
  std::vector<std::uint8_t> out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return out;
}

std::string default_data_dir() {
  const char* env = std::getenv("COHORT_DATA_DIR");
  if (env != nullptr && *env != '\0') return env;
  if (std::ifstream("data/sklearn/digits.csv.gz").good()) return "data";
  return COHORT_SOURCE_DATA_DIR;
}

}  // namespace cohort::apps
