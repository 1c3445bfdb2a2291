// Criteo's click logs in their own TSV format (Kaggle's train.txt): one sample per line,
// `label \t I1..I13 \t C1..C26`, an empty field missing; read streaming from a plain or gzip
// file (detected by its bytes, not its name), every line validated. The model sees the dense
// counts as log1p(max(I, 0)) (0 where missing) and each hashed category C_t as a row of table
// t: int(C_t, 16) mod rows[t], DLRM's mapping and the contract of
// ../shared/bench/criteo_synth.py, whose FILE.meta.json gives the table sizes it wrote for.
//
//   auto rows = criteo_table_rows("/tmp/criteo/unit_train.tsv", {});   // from its .meta.json
//   if (!rows) return rows.error();
//   auto train = read_criteo("/tmp/criteo/unit_train.tsv", *rows);
//   if (!train) return train.error();        // "unit_train.tsv:17: field I3 ('4x') is not an integer"
//   // train->columns: "dense" [N,13] f32, "c1".."c26" [N,1] i32 rows, "label" [N] f32 0/1
//   in_order_sampler s(train->columns, /*batch=*/128);
//   column_set b = s.batch_at(0);                       // the same names, 128 rows each
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "apps/data/samplers.hpp"
#include "graph/error.hpp"
#include "graph/tensor.hpp"

namespace cohort::apps {

constexpr int criteo_dense_features = 13;
constexpr int criteo_tables = 26;

/// The input name of table t (0-based): "c1" .. "c26".
std::string criteo_table_input(int t);

/// The per-table row counts of DLRM's Kaggle preprocessing (33,762,577 rows in all).
extern const std::array<std::int64_t, criteo_tables> criteo_kaggle_rows;

/// The samples as the model's inputs: "dense" [N,13] f32 (log1p(max(count, 0)), 0 where
/// missing), "c1".."c26" [N,1] i32 (the row of each table), "label" [N] f32 (0 or 1).
struct criteo_set {
  column_set columns;
  std::int64_t size() const { return columns.empty() ? 0 : columns.at("label").shape()[0]; }
  const tensor& dense() const { return columns.at("dense"); }
  const tensor& labels() const { return columns.at("label"); }
  const tensor& table(int t) const { return columns.at(criteo_table_input(t)); }  // 0-based
};

/// The tables' sizes: `given` as 26 sizes, or one cap applied to Kaggle's sizes (0: none);
/// empty: the `table_rows` of FILE.meta.json beside `file` (as criteo_synth.py writes it),
/// else Kaggle's sizes. Errors: a wrong count or a non-positive size; a meta file that is
/// not JSON or whose table_rows is malformed (named).
result<std::vector<std::int64_t>> criteo_table_rows(const std::string& file, const std::vector<std::int64_t>& given);

/// Reads every line of `file`. Errors name the file and line: a wrong field count, a label
/// other than 0 or 1, an I that is not an integer, a C that is not hex of at most 8 digits,
/// a line longer than 4096 bytes, a last line without its newline, an empty file.
result<criteo_set> read_criteo(const std::string& file, const std::vector<std::int64_t>& table_rows);

}  // namespace cohort::apps
