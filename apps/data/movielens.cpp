// The MovieLens CSV reader: RFC 4180 fields (quotes, doubled quotes inside), ids mapped to
// dense rows in order of first appearance, genres to rows in name order.
#include "apps/data/movielens.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>

#include "graph/op.hpp"
#include "graph/random.hpp"

namespace cohort::apps {
namespace {

// The fields of one CSV line; false when a quote is not closed.
bool split_csv(const std::string& line, std::vector<std::string>& fields) {
  fields.clear();
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  fields.push_back(std::move(field));
  return !quoted;
}

bool parse_id(const std::string& s, std::int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out > 0;
}

struct rating_row {
  std::int64_t user, movie;
  float rating, year;
  std::vector<std::string> genres;
};

std::vector<std::string> split_genres(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == '|') {
      if (i > start) out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

}  // namespace

result<movielens_data> load_movielens(const std::string& data_dir) {
  const std::string path = data_dir + "/movielens/ratings.csv";
  std::ifstream in(path);
  if (!in)
    return make_error(errc::not_found, "cannot open " + path + " (scripts/fetch-data.sh writes it from R's dslabs)");
  std::string line;
  std::vector<std::string> f;
  std::getline(in, line);
  if (!split_csv(line, f) || f.size() != 7 || f[0] != "movieId" || f[4] != "userId" || f[5] != "rating")
    return make_error(errc::invalid_argument,
                      path + ":1: expected the header movieId,title,year,genres,userId,rating,timestamp");
  std::vector<rating_row> rows;
  for (std::int64_t number = 2; std::getline(in, line); ++number) {
    auto fail = [&](const std::string& what) {
      return make_error(errc::invalid_argument, path + ":" + std::to_string(number) + ": " + what);
    };
    if (line.size() > 4096) return fail("line longer than 4096 bytes");
    if (!split_csv(line, f)) return fail("a quoted field is not closed");
    if (f.size() != 7) return fail(std::to_string(f.size()) + " fields, expected 7");
    rating_row r;
    if (!parse_id(f[0], r.movie)) return fail("movieId '" + f[0] + "' is not a positive integer");
    if (!parse_id(f[4], r.user)) return fail("userId '" + f[4] + "' is not a positive integer");
    double rating = 0;
    auto [p, ec] = std::from_chars(f[5].data(), f[5].data() + f[5].size(), rating);
    if (ec != std::errc() || p != f[5].data() + f[5].size() || rating < 0 || rating > 5)
      return fail("rating '" + f[5] + "' is not a number in [0, 5]");
    r.rating = static_cast<float>(rating);
    std::int64_t year = 0;
    r.year = f[2] == "NA" || !parse_id(f[2], year) ? 0.f : static_cast<float>(year - 1990) / 20.f;
    r.genres = split_genres(f[3]);
    rows.push_back(std::move(r));
  }
  if (rows.empty()) return make_error(errc::invalid_argument, path + " has no ratings");

  movielens_data d;
  std::map<std::int64_t, std::int32_t> user_row, movie_row;
  std::map<std::string, std::int32_t> genre_row;
  for (const auto& r : rows) {
    user_row.emplace(r.user, static_cast<std::int32_t>(user_row.size()));
    movie_row.emplace(r.movie, static_cast<std::int32_t>(movie_row.size()));
    for (const auto& g : r.genres) genre_row.emplace(g, 0);
    d.max_genres = std::max<std::int64_t>(d.max_genres, static_cast<std::int64_t>(r.genres.size()));
  }
  for (auto& [name, row] : genre_row) {
    row = static_cast<std::int32_t>(d.genre_names.size());
    d.genre_names.push_back(name);
  }
  d.users = static_cast<std::int64_t>(user_row.size());
  d.movies = static_cast<std::int64_t>(movie_row.size());
  d.genres = static_cast<std::int64_t>(genre_row.size());
  d.max_genres = std::max<std::int64_t>(d.max_genres, 1);

  // the seeded split, the training rows in the split's shuffled order
  rng split(1234);
  std::vector<std::size_t> train_rows, test_rows;
  for (std::size_t i = 0; i < rows.size(); ++i) (split.below(5) == 0 ? test_rows : train_rows).push_back(i);
  for (std::size_t i = train_rows.size(); i > 1; --i) std::swap(train_rows[i - 1], train_rows[split.below(i)]);

  d.train_ratings.assign(static_cast<std::size_t>(d.movies), 0);
  d.train_clicks.assign(static_cast<std::size_t>(d.movies), 0);
  auto build = [&](const std::vector<std::size_t>& which, movielens_split& out, bool count) {
    const auto n = static_cast<std::int64_t>(which.size());
    std::vector<std::int32_t> users, movies, genres;
    tensor dense = tensor::empty({n, 1}), label = tensor::empty({n});
    for (std::int64_t k = 0; k < n; ++k) {
      const rating_row& r = rows[which[static_cast<std::size_t>(k)]];
      users.push_back(user_row.at(r.user));
      const std::int32_t m = movie_row.at(r.movie);
      movies.push_back(m);
      for (std::int64_t g = 0; g < d.max_genres; ++g)
        genres.push_back(g < static_cast<std::int64_t>(r.genres.size())
                             ? genre_row.at(r.genres[static_cast<std::size_t>(g)])
                             : bag_padding);
      dense.data<float>()[k] = r.year;
      label.data<float>()[k] = r.rating >= 4.f ? 1.f : 0.f;
      if (count) {
        ++d.train_ratings[static_cast<std::size_t>(m)];
        d.train_clicks[static_cast<std::size_t>(m)] += r.rating >= 4.f ? 1 : 0;
      }
    }
    out.columns["user"] = tensor::from_ints({n, 1}, users);
    out.columns["movie"] = tensor::from_ints({n, 1}, movies);
    out.columns["genres"] = tensor::from_ints({n, d.max_genres}, genres);
    out.columns["dense"] = dense;
    out.columns["label"] = label;
  };
  build(train_rows, d.train, true);
  build(test_rows, d.test, false);
  return d;
}

}  // namespace cohort::apps
