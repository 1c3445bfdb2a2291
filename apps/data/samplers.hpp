// Batch samplers, deterministic by step: batch k is the same whenever it is asked for
// (a redone step after a failure reads the same rows), and asking in order costs nothing.
//
//   auto d = load_classification("synth", default_data_dir(), /*seed=*/1, /*features=*/20, /*classes=*/4);
//   if (!d) return d.error();
//   epoch_sampler s(d->train, /*batch=*/128, /*seed=*/1);    // as mlp_torch.py draws batches
//   std::map<std::string, tensor> b = s.batch_at(7);          // {"x": [128,20], "y": [128]}
//   std::vector<std::uint8_t> bytes(4096, 'a');
//   window_sampler w(bytes, /*batch=*/16, /*seq=*/128, 1);    // random text windows, as gpt_torch.py
//   auto t = w.batch_at(0);                                   // {"tokens": [16,128], "targets": [16,128]}
//   column_set table{{"x", d->train.x}, {"label", tensor::zeros({d->train.size()})}};
//   in_order_sampler o(table, /*batch=*/64);                  // file order, as dlrm_torch.py
//   auto c = o.batch_at(3);                                   // rows 192..255 of every column
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "apps/data/datasets.hpp"
#include "graph/random.hpp"

namespace cohort::apps {

/// A table of named columns, each [N, ...] (any dtype): a model's inputs for N samples.
using column_set = std::map<std::string, tensor>;

/// Rows [begin, begin + count) of every column (count <= N - begin), as new tensors.
column_set rows_of(const column_set& table, std::int64_t begin, std::int64_t count);

/// Batches in table order: batch k holds rows [k B, k B + B) modulo N (wrapping round the
/// end), as ../shared/bench/dlrm_torch.py takes a file's samples.
class in_order_sampler {
 public:
  in_order_sampler(const column_set& table, std::int64_t batch) : table_(table), batch_(batch) {}
  column_set batch_at(std::int64_t step) const;

 private:
  const column_set& table_;
  std::int64_t batch_;
};

/// Consecutive batches of a seeded permutation, reshuffled when the rest would not fill a batch.
class epoch_sampler {
 public:
  epoch_sampler(const labeled_set& set, std::int64_t batch, std::uint64_t seed);
  std::map<std::string, tensor> batch_at(std::int64_t step);

 private:
  void restart();
  void shuffle();
  const labeled_set& set_;
  std::int64_t batch_;
  std::uint64_t seed_;
  rng order_{0};
  std::vector<std::int64_t> perm_;
  std::int64_t pos_ = 0, next_step_ = 0;
};

/// Random windows of a byte string: tokens = bytes[i, i+seq), targets = bytes[i+1, i+seq+1).
class window_sampler {
 public:
  window_sampler(const std::vector<std::uint8_t>& bytes, std::int64_t batch, std::int64_t seq, std::uint64_t seed);
  std::map<std::string, tensor> batch_at(std::int64_t step);

 private:
  const std::vector<std::uint8_t>& bytes_;
  std::int64_t batch_, seq_;
  std::uint64_t seed_;
  rng draw_{0};
  std::int64_t next_step_ = 0;
};

}  // namespace cohort::apps
