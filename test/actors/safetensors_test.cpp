// The safetensors format as its published rules state it: what cohort writes is byte for byte
// an 8-byte little-endian header length, a JSON header padded with spaces to 8 bytes, and the
// tensors' row-major bytes at their data_offsets; every malformed file is refused with a
// message naming the file and what is wrong, before any tensor is allocated.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "actors/safetensors.hpp"

using namespace cohort;
namespace st = cohort::actors::safetensors;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("cohort-st-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file of a given header text and `data` bytes after it.
std::string raw_file(const std::string& name, const std::string& header, const std::string& data,
                     std::uint64_t claimed_length = 0) {
  const std::string path = temp_path(name);
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = claimed_length ? claimed_length : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
  return path;
}

std::string refusal(const std::string& path) {
  auto h = st::read_header(path);
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().code == errc::io_error);
  CHECK(h.error().message.find(path) != std::string::npos);  // the file is named
  return h.error().message;
}

}  // namespace

TEST_CASE("a written file follows the format byte for byte and reads back") {
  const std::string path = temp_path("rt.safetensors");
  tensor w = tensor::from({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  tensor labels = tensor::from_ints({3}, std::vector<std::int32_t>{7, 8, 9});
  std::vector<st::named_tensor> out;
  out.push_back({"fc.weight", w.transpose(0, 1)});  // a strided view is written row-major
  out.push_back({"labels", labels});
  REQUIRE(st::write_file(path, out, {{"format", "pt"}}, true).ok());

  const std::string b = bytes_of(path);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
  CHECK(n % 8 == 0);  // padded to 8 bytes
  const auto header = nlohmann::json::parse(b.substr(8, n));
  CHECK(header["__metadata__"]["format"] == "pt");
  CHECK(header["fc.weight"]["dtype"] == "F32");
  CHECK(header["fc.weight"]["shape"] == nlohmann::json::array({3, 2}));
  CHECK(header["labels"]["dtype"] == "I32");
  const auto off = header["fc.weight"]["data_offsets"];
  REQUIRE(off[1].get<std::uint64_t>() - off[0].get<std::uint64_t>() == 24);
  float first[6];
  std::memcpy(first, b.data() + 8 + n + off[0].get<std::uint64_t>(), 24);
  CHECK(std::vector<float>(first, first + 6) == std::vector<float>{1, 4, 2, 5, 3, 6});  // the transpose, packed
  CHECK(b.size() == 8 + n + 24 + 12);                                                   // nothing after the last tensor

  auto back = st::read_file(path);
  REQUIRE_MESSAGE(back.ok(), back.error().message);
  CHECK(back->at("fc.weight").shape() == shape({3, 2}));
  CHECK(back->at("fc.weight").to_vector() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(back->at("labels").type() == dtype::i32);
  CHECK(back->at("labels").data<std::int32_t>()[2] == 9);
}

TEST_CASE("a name used twice is refused when writing") {
  std::vector<st::named_tensor> out;
  out.push_back({"a", tensor::zeros({2})});
  out.push_back({"a", tensor::zeros({2})});
  auto w = st::write_file(temp_path("dup.safetensors"), out, {}, false);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message.find("two tensors named 'a'") != std::string::npos);
}

TEST_CASE("malformed safetensors files are refused naming the file and the fault" * doctest::test_suite("failure")) {
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  CHECK(refusal(raw_file("empty", "", "")).find("not a JSON object") != std::string::npos);
  {
    std::ofstream(temp_path("tiny"), std::ios::binary) << "abc";
    CHECK(refusal(temp_path("tiny")).find("shorter than a header") != std::string::npos);
  }
  CHECK(refusal(raw_file("long", good_header, eight, 1u << 20)).find("longer than the file") != std::string::npos);
  CHECK(refusal(raw_file("huge", good_header, eight, 1ull << 40)).find("over the limit") != std::string::npos);
  CHECK(refusal(raw_file("notjson", "{not json", eight)).find("not a JSON object") != std::string::npos);
  CHECK(refusal(raw_file("array", "[1,2]", eight)).find("not a JSON object") != std::string::npos);
  CHECK(refusal(raw_file("noshape", R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight))
            .find("tensor 'a' has no 'shape'") != std::string::npos);
  CHECK(refusal(raw_file("dtype", R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", eight))
            .find("dtype 'F64'") != std::string::npos);
  CHECK(refusal(raw_file("negative", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight))
            .find("not a non-negative integer") != std::string::npos);
  CHECK(refusal(raw_file("disagree", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight))
            .find("needs 12") != std::string::npos);
  CHECK(refusal(raw_file("truncated", good_header, "\0\0\0\0")).find("truncated") != std::string::npos);
  CHECK(refusal(raw_file("trailing", good_header, eight + "xx")).find("after the last tensor") != std::string::npos);
  CHECK(refusal(raw_file("overlap",
                         R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         eight + "abcd"))
            .find("overlaps") != std::string::npos);
  CHECK(refusal(raw_file("hole", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight)).find("a hole") !=
        std::string::npos);
  CHECK(refusal(raw_file("overflow", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                         eight))
            .find("overflows") != std::string::npos);
  CHECK(refusal(
            raw_file("meta", R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight))
            .find("__metadata__ 'k' is not a string") != std::string::npos);
  CHECK(refusal(temp_path("missing-file")).find("cannot open") != std::string::npos);
}
