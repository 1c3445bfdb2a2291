// The Criteo TSV reader against known answers (the first line criteo_synth.py writes, as its
// README states it), plain and gzip alike; every kind of malformed line refused naming file
// and line; table sizes from the options and the .meta.json; the peer's batch order; and the
// binary metrics (ROC AUC with ties, log-loss) against hand-computed values.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "apps/data/bags.hpp"
#include "apps/data/criteo.hpp"
#include "apps/data/movielens.hpp"
#include "apps/driver/evaluate.hpp"

using namespace cohort;
using namespace cohort::apps;
namespace fs = std::filesystem;

namespace {

// The first line of criteo_synth.py's unit_train.tsv (seed 1, --max-rows 100000).
const std::string first_line =
    "0\t4\t7\t4\t0\t8\t4\t1\t5\t4\t3\t2\t5\t1\t9e28c5bb\tdc6df125\t5427ae2e\t89b35f12\t1ea450eb\t8e940d78\t"
    "ac224c18\ta751d0dc\te3753f5f\teef327af\tf887befe\t57e3fd3e\t2cadfd86\tea60c521\t015dc0a4\t603e877d\t"
    "b6cdb916\t6e91369a\t3e9fe156\te40dc7f3\t24a03375\t7df28b68\t53e06ffa\t453ff134\t69cb8fb4\td2aa7172\n";

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("cohort-criteo-" + std::to_string(::getpid()) + "-" + name);
}

fs::path write_text(const std::string& name, const std::string& text) {
  fs::path p = temp_file(name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::vector<std::int64_t> capped(std::int64_t cap) { return *criteo_table_rows("", {cap}); }

std::string error_of(const std::string& name, const std::string& text) {
  fs::path p = write_text(name, text);
  auto r = read_criteo(p.string(), capped(100000));
  fs::remove(p);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

// The first line with field `f` (0 = label) replaced.
std::string with_field(int f, const std::string& value) {
  std::string line = first_line;
  std::size_t begin = 0;
  for (int i = 0; i < f; ++i) begin = line.find('\t', begin) + 1;
  std::size_t end = line.find_first_of("\t\n", begin);
  return line.replace(begin, end - begin, value);
}

}  // namespace

TEST_CASE("the Criteo reader gives the known answer for criteo_synth.py's first line, plain and gzip") {
  fs::path plain = write_text("plain.tsv", first_line + first_line);
  fs::path packed = temp_file("packed.tsv.gz");
  {
    gzFile f = gzopen(packed.c_str(), "wb");
    REQUIRE(f != nullptr);
    const std::string twice = first_line + first_line;
    gzwrite(f, twice.data(), static_cast<unsigned>(twice.size()));
    gzclose(f);
  }
  for (const fs::path& p : {plain, packed}) {
    CAPTURE(p.string());
    auto s = read_criteo(p.string(), capped(100000));
    REQUIRE_MESSAGE(s.ok(), s.error().message);
    REQUIRE(s->size() == 2);
    CHECK(s->labels().data<float>()[0] == 0.f);
    const float counts[13] = {4, 7, 4, 0, 8, 4, 1, 5, 4, 3, 2, 5, 1};
    for (int i = 0; i < 13; ++i) CHECK(s->dense().data<float>()[i] == static_cast<float>(std::log1p(counts[i])));
    CHECK(s->table(0).data<std::int32_t>()[0] == 1027);   // 9e28c5bb mod 1460
    CHECK(s->table(1).data<std::int32_t>()[0] == 388);    // dc6df125 mod 583
    CHECK(s->table(2).data<std::int32_t>()[0] == 86638);  // 5427ae2e mod 100000
    CHECK(s->table(0).data<std::int32_t>()[1] == 1027);   // the second line
  }
  fs::remove(plain);
  fs::remove(packed);
}

TEST_CASE("an empty I is missing (0) and an empty C is row 0, a negative count reads as 0") {
  fs::path p = write_text("missing.tsv", with_field(14, "") + with_field(2, "-5") + with_field(3, ""));
  auto s = read_criteo(p.string(), capped(100000));
  fs::remove(p);
  REQUIRE_MESSAGE(s.ok(), s.error().message);
  REQUIRE(s->size() == 3);
  CHECK(s->table(0).data<std::int32_t>()[0] == 0);     // C1 empty
  CHECK(s->table(0).data<std::int32_t>()[1] == 1027);  // the second line's C1 as given
  CHECK(s->dense().data<float>()[13 + 1] == 0.f);      // I2 = -5: log1p(max(-5, 0))
  CHECK(s->dense().data<float>()[26 + 2] == 0.f);      // I3 missing
  CHECK(s->dense().data<float>()[0] == static_cast<float>(std::log1p(4.0)));
}

TEST_CASE("malformed Criteo lines are refused with the file, the line and what is wrong") {
  const std::string good = first_line;
  CHECK(error_of("fields.tsv", good + "0\t1\t2\n").find("fields.tsv:2: 3 tab-separated fields, expected 40") !=
        std::string::npos);
  CHECK(error_of("many.tsv", good.substr(0, good.size() - 1) + "\t00\n").find("many.tsv:1: more than 40") !=
        std::string::npos);
  CHECK(error_of("label.tsv", with_field(0, "2")).find("label.tsv:1: label '2' is not 0 or 1") != std::string::npos);
  CHECK(error_of("count.tsv", good + with_field(3, "4x")).find("count.tsv:2: field I3 ('4x') is not an integer") !=
        std::string::npos);
  CHECK(error_of("float.tsv", with_field(1, "1.5")).find("field I1 ('1.5') is not an integer") != std::string::npos);
  CHECK(error_of("hex.tsv", with_field(14, "9e28c5bg")).find("hex.tsv:1: field C1 ('9e28c5bg') is not a hex value") !=
        std::string::npos);
  CHECK(error_of("wide.tsv", with_field(16, "123456789")).find("field C3 ('123456789') is not a hex value") !=
        std::string::npos);
  CHECK(error_of("long.tsv", good + std::string(5000, '1') + "\n").find("long.tsv:2: line longer than 4096 bytes") !=
        std::string::npos);
  CHECK(error_of("cut.tsv", good + good.substr(0, 30)).find("cut.tsv:2: the last line has no newline") !=
        std::string::npos);
  CHECK(error_of("empty.tsv", "").find("has no samples") != std::string::npos);
  CHECK_FALSE(read_criteo(temp_file("absent.tsv").string(), capped(0)).ok());
}

TEST_CASE("table sizes come from the options, else the file's .meta.json, else Criteo Kaggle's") {
  auto kaggle = criteo_table_rows(temp_file("none.tsv").string(), {});
  REQUIRE(kaggle.ok());
  CHECK((*kaggle)[2] == 10131227);
  auto cap = criteo_table_rows("", {1000});
  REQUIRE(cap.ok());
  CHECK((*cap)[0] == 1000);
  CHECK((*cap)[1] == 583);
  CHECK((*cap)[8] == 3);
  CHECK_FALSE(criteo_table_rows("", {1, 2, 3}).ok());
  CHECK(criteo_table_rows("", {-1}).error().message.find("--model.rows") != std::string::npos);
  fs::path data = temp_file("meta.tsv");
  std::ofstream(data.string() + ".meta.json")
      << R"({"table_rows": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26]})";
  auto meta = criteo_table_rows(data.string(), {});
  REQUIRE_MESSAGE(meta.ok(), meta.error().message);
  CHECK((*meta)[25] == 26);
  std::ofstream(data.string() + ".meta.json") << R"({"table_rows": [1, 2]})";
  CHECK(criteo_table_rows(data.string(), {}).error().message.find("lists 2 table sizes") != std::string::npos);
  std::ofstream(data.string() + ".meta.json") << "not json";
  CHECK(criteo_table_rows(data.string(), {}).error().message.find("is not a JSON object") != std::string::npos);
  fs::remove(data.string() + ".meta.json");
}

TEST_CASE("Criteo batches follow the file and wrap round its end, as the PyTorch peer takes them") {
  std::string text;
  for (int i = 0; i < 5; ++i) text += with_field(14, "0000000" + std::to_string(i));
  fs::path p = write_text("order.tsv", text);
  auto s = read_criteo(p.string(), capped(100000));
  fs::remove(p);
  REQUIRE(s.ok());
  in_order_sampler sampler(s->columns, 3);
  auto b0 = sampler.batch_at(0), b1 = sampler.batch_at(1), b3 = sampler.batch_at(3);
  CHECK(b0.at("c1").shape() == (shape{3, 1}));
  CHECK(b0.at("dense").shape() == (shape{3, 13}));
  CHECK(b0.at("c1").data<std::int32_t>()[2] == 2);
  // batch 1 is samples 3, 4, 0
  CHECK(b1.at("c1").data<std::int32_t>()[0] == 3);
  CHECK(b1.at("c1").data<std::int32_t>()[1] == 4);
  CHECK(b1.at("c1").data<std::int32_t>()[2] == 0);
  CHECK(b1.at("label").shape() == (shape{3}));
  // batch 3 is samples 4, 0, 1
  CHECK(b3.at("c1").data<std::int32_t>()[0] == 4);
  CHECK(b3.at("c1").data<std::int32_t>()[2] == 1);
  // a batch larger than the set wraps more than once
  in_order_sampler wide(s->columns, 12);
  auto w = wide.batch_at(0);
  CHECK(w.at("c1").data<std::int32_t>()[11] == 1);
}

TEST_CASE("ROC AUC counts ties as half and log-loss matches the hand-computed value") {
  // positives at 0.9 and 0.5, negatives at 0.5 and 0.1: pairs won 1 + 1 + 0.5 + 1 of 4
  auto auc = roc_auc({0.9f, 0.5f, 0.5f, 0.1f}, {1.f, 1.f, 0.f, 0.f});
  REQUIRE(auc.ok());
  CHECK(*auc == doctest::Approx(0.875));
  CHECK(*roc_auc({0.1f, 0.2f, 0.3f}, {1.f, 0.f, 0.f}) == doctest::Approx(0.0));
  CHECK_FALSE(roc_auc({0.1f, 0.2f}, {1.f, 1.f}).ok());
  CHECK_FALSE(roc_auc({NAN, 0.2f}, {1.f, 0.f}).ok());
  // logits 0 and ln 3: p = 0.5 and 0.75, labels 1 and 0: (ln 2 + ln 4) / 2
  CHECK(log_loss_of_logits({0.f, std::log(3.f)}, {1.f, 0.f}) == doctest::Approx((std::log(2.0) + std::log(4.0)) / 2));
}

TEST_CASE("EmbeddingBag's (ids, offsets) bags become rows padded with -1") {
  auto bags = padded_bags({4, 9, 2, 7, 7}, {0, 2, 2});
  REQUIRE(bags.ok());
  REQUIRE(bags->shape() == (shape{3, 3}));
  const std::int32_t want[9] = {4, 9, -1, -1, -1, -1, 2, 7, 7};
  for (int i = 0; i < 9; ++i) CHECK(bags->data<std::int32_t>()[i] == want[i]);
  auto fixed = padded_bags({4, 9, 2, 7, 7}, {0, 2, 2}, 4);
  REQUIRE(fixed.ok());
  CHECK(fixed->shape() == (shape{3, 4}));
  CHECK(fixed->data<std::int32_t>()[10] == 7);
  CHECK(fixed->data<std::int32_t>()[11] == bag_padding);
  CHECK(padded_bags({1, 2, 3}, {0, 3}, 2).error().message.find("does not fit rows of 2") != std::string::npos);
  CHECK_FALSE(padded_bags({1}, {1}).ok());
  CHECK_FALSE(padded_bags({1, 2}, {0, 3}).ok());
  CHECK_FALSE(padded_bags({-3}, {0}).ok());
}

TEST_CASE("the MovieLens reader handles quoted titles and NA years, and names a malformed line") {
  const fs::path dir = temp_file("movielens-dir");
  fs::create_directories(dir / "movielens");
  std::ofstream(dir / "movielens" / "ratings.csv")
      << "\"movieId\",\"title\",\"year\",\"genres\",\"userId\",\"rating\",\"timestamp\"\n"
      << "31,\"Dangerous Minds, \"\"the\"\" film\",1995,\"Drama\",1,2.5,1260759144\n"
      << "1029,\"Dumbo\",NA,\"Animation|Children|Drama\",1,4,1260759179\n"
      << "31,\"Dangerous Minds, \"\"the\"\" film\",1995,\"Drama\",2,5,1260759180\n";
  auto ml = load_movielens(dir.string());
  REQUIRE_MESSAGE(ml.ok(), ml.error().message);
  CHECK(ml->users == 2);
  CHECK(ml->movies == 2);
  CHECK(ml->genres == 3);
  CHECK(ml->max_genres == 3);
  CHECK(ml->train.size() + ml->test.size() == 3);
  CHECK(ml->genre_names == std::vector<std::string>{"Animation", "Children", "Drama"});
  std::ofstream(dir / "movielens" / "ratings.csv", std::ios::app) << "42,\"Open,1999,\"Drama\",3,4,1\n";
  auto bad = load_movielens(dir.string());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("ratings.csv:5: a quoted field is not closed") != std::string::npos);
  fs::remove_all(dir);
}
