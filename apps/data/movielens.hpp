// MovieLens Latest Small (100,004 ratings of 9,066 movies by 671 users; scripts/fetch-data.sh
// writes data/movielens/ratings.csv from R's dslabs package) as a click-through task: a rating
// of 4 or more is a click. Each sample: the user, the movie and its genres (a multi-hot bag,
// padded with -1), and the movie's year as one dense feature ((year - 1990) / 20, 0 when NA).
// The split is a seeded 80/20 draw (split seed 1234, independent of the training seed), the
// training rows shuffled by the same draw (the file is sorted by user).
//
//   auto ml = load_movielens(default_data_dir());
//   if (!ml) return ml.error();          // a missing file names scripts/fetch-data.sh
//   // ml->train.columns: "user", "movie" [N,1] i32, "genres" [N,10] i32, "dense" [N,1], "label" [N]
//   assert(ml->users == 671 && ml->movies == 9066 && ml->genres == 20);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/data/samplers.hpp"
#include "graph/error.hpp"

namespace cohort::apps {

struct movielens_split {
  column_set columns;
  std::int64_t size() const { return columns.empty() ? 0 : columns.at("label").shape()[0]; }
};

struct movielens_data {
  movielens_split train, test;
  std::int64_t users = 0, movies = 0, genres = 0, max_genres = 0;
  std::vector<std::string> genre_names;  // index = row of the genre table
  /// Per movie row: ratings and clicks in the training split (the baselines' counts).
  std::vector<std::int64_t> train_ratings, train_clicks;
};

/// Reads `data_dir`/movielens/ratings.csv (columns movieId, title, year, genres, userId,
/// rating, timestamp; titles quoted). Errors name the file and line: a wrong field count, a
/// rating that is not a number, an id that is not a positive integer.
result<movielens_data> load_movielens(const std::string& data_dir);

}  // namespace cohort::apps
