// The Criteo TSV reader: zlib's gzread streams a plain or gzip file in 1 MiB blocks, each
// complete line is parsed in place and validated field by field.
#include "apps/data/criteo.hpp"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

namespace cohort::apps {

const std::array<std::int64_t, criteo_tables> criteo_kaggle_rows = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};

namespace {

constexpr std::size_t max_line = 4096;
constexpr int fields_per_line = 1 + criteo_dense_features + criteo_tables;

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string field_name(int f) {
  if (f == 0) return "label";
  if (f <= criteo_dense_features) return "I" + std::to_string(f);
  return "C" + std::to_string(f - criteo_dense_features);
}

std::string shown(std::string_view v) {
  std::string s(v.substr(0, 24));
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 32) c = '?';
  return "'" + s + (v.size() > 24 ? "...'" : "'");
}

// A decimal count: optional '-', 1..18 digits. Empty is missing (returns false in `present`).
bool parse_count(std::string_view v, std::int64_t& out, bool& present) {
  present = !v.empty();
  out = 0;
  if (v.empty()) return true;
  bool neg = v.front() == '-';
  if (neg) v.remove_prefix(1);
  if (v.empty() || v.size() > 18) return false;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  if (neg) out = -out;
  return true;
}

// A hashed category: 0..8 hex digits, either case; empty reads as 0 (DLRM's data_utils.py).
bool parse_hex(std::string_view v, std::uint32_t& out) {
  out = 0;
  if (v.size() > 8) return false;
  for (char c : v) {
    unsigned d;
    if (c >= '0' && c <= '9')
      d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = static_cast<unsigned>(c - 'A' + 10);
    else
      return false;
    out = (out << 4) | d;
  }
  return true;
}

struct parsed_columns {
  std::vector<float> dense, labels;
  std::array<std::vector<std::int32_t>, criteo_tables> ids;
};

class line_parser {
 public:
  line_parser(std::string file, const std::vector<std::int64_t>& rows) : file_(std::move(file)), rows_(rows) {}

  status parse(std::string_view line, std::int64_t number, parsed_columns& out) {
    auto fail = [&](const std::string& what) {
      return make_error(errc::invalid_argument, base_name(file_) + ":" + std::to_string(number) + ": " + what);
    };
    if (line.size() > max_line) return fail("line longer than " + std::to_string(max_line) + " bytes");
    std::array<std::string_view, fields_per_line> f;
    int n = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
      if (i < line.size() && line[i] != '\t') continue;
      if (n == fields_per_line) return fail("more than " + std::to_string(fields_per_line) + " tab-separated fields");
      f[static_cast<std::size_t>(n++)] = line.substr(start, i - start);
      start = i + 1;
    }
    if (n != fields_per_line)
      return fail(std::to_string(n) + " tab-separated fields, expected " + std::to_string(fields_per_line) +
                  " (label, I1..I13, C1..C26)");
    if (f[0] != "0" && f[0] != "1") return fail("label " + shown(f[0]) + " is not 0 or 1");
    out.labels.push_back(f[0] == "1" ? 1.f : 0.f);
    for (int i = 1; i <= criteo_dense_features; ++i) {
      std::int64_t v;
      bool present;
      if (!parse_count(f[static_cast<std::size_t>(i)], v, present))
        return fail("field " + field_name(i) + " (" + shown(f[static_cast<std::size_t>(i)]) + ") is not an integer");
      out.dense.push_back(present ? static_cast<float>(std::log1p(static_cast<double>(std::max<std::int64_t>(v, 0))))
                                  : 0.f);
    }
    for (int t = 0; t < criteo_tables; ++t) {
      const int i = 1 + criteo_dense_features + t;
      std::uint32_t v;
      if (!parse_hex(f[static_cast<std::size_t>(i)], v))
        return fail("field " + field_name(i) + " (" + shown(f[static_cast<std::size_t>(i)]) +
                    ") is not a hex value of at most 8 digits");
      out.ids[static_cast<std::size_t>(t)].push_back(
          static_cast<std::int32_t>(v % static_cast<std::uint64_t>(rows_[static_cast<std::size_t>(t)])));
    }
    return {};
  }

 private:
  std::string file_;
  const std::vector<std::int64_t>& rows_;
};

}  // namespace

std::string criteo_table_input(int t) { return "c" + std::to_string(t + 1); }

result<std::vector<std::int64_t>> criteo_table_rows(const std::string& file, const std::vector<std::int64_t>& given) {
  auto check = [](std::vector<std::int64_t> rows, const std::string& source) -> result<std::vector<std::int64_t>> {
    if (rows.size() != criteo_tables)
      return make_error(errc::invalid_argument, source + " lists " + std::to_string(rows.size()) +
                                                    " table sizes; Criteo has " + std::to_string(criteo_tables));
    for (std::size_t t = 0; t < rows.size(); ++t)
      if (rows[t] < 1 || rows[t] > (std::int64_t{1} << 31) - 1)
        return make_error(errc::invalid_argument, source + ": table " + std::to_string(t + 1) + " has " +
                                                      std::to_string(rows[t]) + " rows (1 .. 2^31-1)");
    return rows;
  };
  if (given.size() == 1) {
    if (given[0] < 0) return make_error(errc::invalid_argument, "--model.rows: a cap must be 0 (none) or positive");
    std::vector<std::int64_t> rows(criteo_kaggle_rows.begin(), criteo_kaggle_rows.end());
    if (given[0] > 0)
      for (auto& r : rows) r = std::min(r, given[0]);
    return rows;
  }
  if (!given.empty()) return check(given, "--model.rows");
  const std::string meta = file + ".meta.json";
  std::ifstream in(meta);
  if (!in) return std::vector<std::int64_t>(criteo_kaggle_rows.begin(), criteo_kaggle_rows.end());
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return make_error(errc::invalid_argument, meta + " is not a JSON object");
  if (!j.contains("table_rows") || !j["table_rows"].is_array())
    return make_error(errc::invalid_argument, meta + " has no table_rows list");
  std::vector<std::int64_t> rows;
  for (const auto& v : j["table_rows"]) {
    if (!v.is_number_integer()) return make_error(errc::invalid_argument, meta + ": table_rows holds a non-integer");
    rows.push_back(v.get<std::int64_t>());
  }
  return check(std::move(rows), meta + " table_rows");
}

result<criteo_set> read_criteo(const std::string& file, const std::vector<std::int64_t>& table_rows) {
  if (table_rows.size() != criteo_tables)
    return make_error(errc::invalid_argument, "read_criteo: 26 table sizes needed");
  gzFile f = gzopen(file.c_str(), "rb");
  if (f == nullptr) return make_error(errc::not_found, "cannot open Criteo file '" + file + "'");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  gzbuffer(f, 1 << 20);
  line_parser parser(file, table_rows);
  parsed_columns cols;
  std::string carry;  // the start of a line the last block cut
  std::vector<char> block(1 << 20);
  std::int64_t line = 0;
  for (;;) {
    const int got = gzread(f, block.data(), static_cast<unsigned>(block.size()));
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      return make_error(errc::io_error, "reading '" + file + "': " + (msg ? msg : "read error"));
    }
    if (got == 0) break;
    std::string_view data(block.data(), static_cast<std::size_t>(got));
    while (!data.empty()) {
      const auto nl = data.find('\n');
      if (nl == std::string_view::npos) {
        carry.append(data);
        if (carry.size() > max_line)
          return make_error(errc::invalid_argument, base_name(file) + ":" + std::to_string(line + 1) +
                                                        ": line longer than " + std::to_string(max_line) + " bytes");
        break;
      }
      std::string_view text = data.substr(0, nl);
      data.remove_prefix(nl + 1);
      ++line;
      if (!carry.empty()) {
        carry.append(text);
        if (auto st = parser.parse(carry, line, cols); !st) return st.error();
        carry.clear();
      } else if (auto st = parser.parse(text, line, cols); !st) {
        return st.error();
      }
    }
  }
  if (!carry.empty())
    return make_error(errc::invalid_argument, base_name(file) + ":" + std::to_string(line + 1) +
                                                  ": the last line has no newline (a truncated file?)");
  if (line == 0) return make_error(errc::invalid_argument, "Criteo file '" + file + "' has no samples");
  criteo_set s;
  s.columns["dense"] = tensor::from({line, criteo_dense_features}, cols.dense);
  for (int t = 0; t < criteo_tables; ++t)
    s.columns[criteo_table_input(t)] = tensor::from_ints({line, 1}, cols.ids[static_cast<std::size_t>(t)]);
  s.columns["label"] = tensor::from({line}, cols.labels);
  return s;
}

}  // namespace cohort::apps
