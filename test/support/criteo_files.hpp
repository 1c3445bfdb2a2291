// Small Criteo-format TSV files for the tests: a learnable one (the label is the parity of
// C1's row, flipped for a tenth of the samples, so a model that learns C1's embedding reaches
// an AUC near 0.9 and one that learns nothing 0.5), and a train/test pair of them.
//
//   auto path = std::filesystem::temp_directory_path() / "train.tsv";
//   cohort::test::write_learnable_criteo(path, /*samples=*/4000, /*seed=*/1);
//   // 26 tables of at most 1000 rows (--model.rows=1000): C1 takes 40 values
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "graph/random.hpp"

namespace cohort::test {

inline std::string criteo_hex(std::uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%08x", v);
  return b;
}

inline void write_learnable_criteo(const std::filesystem::path& path, std::int64_t samples, std::uint64_t seed) {
  std::ofstream out(path, std::ios::binary);
  rng r(seed);
  for (std::int64_t i = 0; i < samples; ++i) {
    const std::uint32_t c1_row = static_cast<std::uint32_t>(r.below(40));
    int label = static_cast<int>(c1_row % 2);
    if (r.below(10) == 0) label = 1 - label;
    out << label;
    for (int f = 0; f < 13; ++f) {
      out << '\t';
      if (r.below(50) != 0) out << r.below(100);  // 2 % missing
    }
    // C1's value is its row plus a multiple of 1000: value mod 1000 == row
    out << '\t' << criteo_hex(c1_row + 1000u * static_cast<std::uint32_t>(r.below(4000)));
    for (int t = 1; t < 26; ++t) out << '\t' << criteo_hex(static_cast<std::uint32_t>(r.next()));
    out << '\n';
  }
}

/// A learnable training file (4,000 samples) and its test file (1,000), removed at the end;
/// args(): a small DLRM over them (tables of 1,000 rows, batch 64, 250 steps, 1 thread).
struct criteo_pair {
  std::filesystem::path train, test;
  criteo_pair() {
    const std::string stem = "cohort-dlrm-" + std::to_string(::getpid());
    train = std::filesystem::temp_directory_path() / (stem + "-train.tsv");
    test = std::filesystem::temp_directory_path() / (stem + "-test.tsv");
    write_learnable_criteo(train, 4000, 1);
    write_learnable_criteo(test, 1000, 2);
  }
  ~criteo_pair() {
    std::filesystem::remove(train);
    std::filesystem::remove(test);
  }
  std::string args() const {
    return "--data.file=" + train.string() + " --data.test-file=" + test.string() +
           " --model.rows=1000 --model.bottom=32,16 --model.top=32 --train.batch=64 --train.steps=250 "
           "--train.threads=1";
  }
};

}  // namespace cohort::test
