// Process mesh coordinates and groups.
#include "graph/mesh.hpp"

#include <set>

namespace cohort {

process_mesh::process_mesh(std::vector<std::pair<std::string, std::int64_t>> axes) : axes_(std::move(axes)) {
  for (const auto& a : axes_) size_ *= a.second;
}

result<process_mesh> make_mesh(std::vector<std::pair<std::string, std::int64_t>> axes) {
  std::set<std::string> names;
  for (const auto& [name, n] : axes) {
    if (name.empty()) return make_error(errc::invalid_argument, "mesh: an axis has no name");
    if (!names.insert(name).second)
      return make_error(errc::invalid_argument, "mesh: axis '" + name + "' appears twice");
    if (n < 1) return make_error(errc::invalid_argument, "mesh: axis '" + name + "' has size " + std::to_string(n));
  }
  return process_mesh(std::move(axes));
}

int process_mesh::axis_index(const std::string& name) const {
  for (std::size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].first == name) return static_cast<int>(i);
  return -1;
}

std::int64_t process_mesh::size_of(const std::string& name) const {
  int i = axis_index(name);
  return i < 0 ? 1 : axis_size(i);
}

std::vector<std::int64_t> process_mesh::coordinates(int rank) const {
  std::vector<std::int64_t> c(axes_.size());
  std::int64_t r = rank;
  for (std::size_t i = axes_.size(); i-- > 0;) {
    c[i] = r % axes_[i].second;
    r /= axes_[i].second;
  }
  return c;
}

std::int64_t process_mesh::coordinate(int rank, const std::string& axis) const {
  int i = axis_index(axis);
  return i < 0 ? 0 : coordinates(rank)[static_cast<std::size_t>(i)];
}

int process_mesh::rank_at(const std::vector<std::int64_t>& coords) const {
  std::int64_t r = 0;
  for (std::size_t i = 0; i < axes_.size(); ++i) r = r * axes_[i].second + coords[i];
  return static_cast<int>(r);
}

std::vector<int> process_mesh::group(int rank, const std::string& axis) const {
  int i = axis_index(axis);
  if (i < 0) return {rank};
  auto c = coordinates(rank);
  std::vector<int> out;
  for (std::int64_t k = 0; k < axis_size(i); ++k) {
    c[static_cast<std::size_t>(i)] = k;
    out.push_back(rank_at(c));
  }
  return out;
}

std::string process_mesh::to_string() const {
  std::string out = "{";
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if (i > 0) out += ',';
    out += axes_[i].first;
    out += ':';
    out += std::to_string(axes_[i].second);
  }
  return out + "}";
}

}  // namespace cohort
