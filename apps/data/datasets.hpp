// The data sets the apps train on, loaded into memory as f32 features and i32 labels, and
// byte-level text for language models. Files come from scripts/fetch-data.sh (into data/,
// or $COHORT_DATA_DIR); a missing file is an error that names it and the fetch command.
//
//   auto d = load_classification("digits", default_data_dir(), /*seed=*/0);
//   if (!d) return d.error();       // a missing file: named, with the fetch command
//   assert(d->train.size() == 1438 && d->test.size() == 359 && d->features == 64 && d->classes == 10);
//   // d->train.x  [N,64] in [0,1];  d->train.y  [N] in 0..9
//   auto text = load_bytes("/usr/share/common-licenses/GPL-3");   // result<std::vector<std::uint8_t>>
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/error.hpp"
#include "graph/tensor.hpp"

namespace cohort::apps {

struct labeled_set {
  tensor x;  // [N, features] f32
  tensor y;  // [N] i32
  std::int64_t size() const { return x.defined() ? x.shape()[0] : 0; }
};

struct classification_data {
  std::string name;
  labeled_set train, test;  // test may be empty (synth)
  std::int64_t features = 0, classes = 0;
  std::string note;  // how the split was made, for the log
};

/// name: digits | fashion | mnist | synth. `data_dir` holds the fetched files.
/// digits: sklearn's 1797 8x8 digits, a fixed 80/20 split (split seed 1234, independent
///   of the training seed). fashion, mnist: the train and t10k idx files; when only t10k
///   is present (Tier A), its first 8000 images train and the last 2000 test.
/// synth: the linear-teacher set of ../shared/bench/mlp_torch.py: x ~ N(0,1) [8192,784],
///   labels argmax(x @ W) for W ~ N(0,1) [784,10], all from `seed`; no test split.
result<classification_data> load_classification(const std::string& name, const std::string& data_dir,
                                                std::uint64_t seed, std::int64_t synth_features = 784,
                                                std::int64_t synth_classes = 10);

/// The bytes of a file (a byte-level LM's tokens).
result<std::vector<std::uint8_t>> load_bytes(const std::string& path);

/// The data directory: $COHORT_DATA_DIR if set, else ./data if it holds the fetched files,
/// else the data/ folder of the source tree this binary was built from.
std::string default_data_dir();

}  // namespace cohort::apps
