// A directory of named tensors for exchanging data with the PyTorch oracle script:
// manifest.txt has one line per tensor "name dtype d0,d1,..." and name.bin holds its
// little-endian elements in row-major order.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "graph/tensor.hpp"

namespace cohort::test {

inline void write_tensors(const std::filesystem::path& dir, const std::map<std::string, tensor>& ts) {
  std::filesystem::create_directories(dir);
  std::ofstream manifest(dir / "manifest.txt");
  for (const auto& [name, t] : ts) {
    tensor c = t.contiguous();
    manifest << name << ' ' << to_string(c.type()) << ' ';
    for (int i = 0; i < c.shape().rank(); ++i) manifest << (i ? "," : "") << c.shape()[i];
    manifest << '\n';
    std::ofstream f(dir / (name + ".bin"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(c.data<std::byte>()), static_cast<std::streamsize>(c.numel() * 4));
  }
}

inline std::map<std::string, tensor> read_tensors(const std::filesystem::path& dir) {
  std::map<std::string, tensor> out;
  std::ifstream manifest(dir / "manifest.txt");
  if (!manifest) throw std::runtime_error("no manifest in " + dir.string());
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::string name, type, dims;
    in >> name >> type >> dims;
    std::vector<std::int64_t> extents;
    std::istringstream ds(dims);
    for (std::string d; std::getline(ds, d, ',');)
      if (!d.empty()) extents.push_back(std::stoll(d));
    tensor t = tensor::empty(shape(extents), type == "i32" ? dtype::i32 : dtype::f32);
    std::ifstream f(dir / (name + ".bin"), std::ios::binary);
    f.read(reinterpret_cast<char*>(t.data<std::byte>()), static_cast<std::streamsize>(t.numel() * 4));
    if (!f) throw std::runtime_error("short file for " + name);
    out.emplace(name, t);
  }
  return out;
}

}  // namespace cohort::test
