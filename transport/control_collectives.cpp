// The control plane's small collectives, every process calling them in the same order with
// the same key: the coordinator's text to all (broadcast_text), every process's line to all
// (all_gather_text), an exact element-wise sum (sum), and tensors gathered at the
// coordinator by index (gather). Star-shaped through the coordinator (process 0, or the node
// that took over from it): small messages only.
// Among the processes still in the job (keep_going), with the membership epoch in every key.
#include <string>
#include <vector>

#include "transport/control_codec.hpp"
#include "transport/control_peer.hpp"
#include "transport/control_plane.hpp"

namespace cohort::transport {

using control::kind;
using control::tag_of;

result<std::string> control_plane::broadcast_text(std::uint64_t key, const std::string& t,
                                                  std::optional<std::uint64_t> epoch) {
  auto e = call_epoch(epoch);
  if (!e) return e.error();
  return broadcast_in(key, t, *e);
}

result<std::string> control_plane::broadcast_in(std::uint64_t key, const std::string& t, std::uint64_t e) {
  key = epoch_key(key, e);
  if (is_leader()) {
    if (t.size() > control::small_payload - 8) return make_error(errc::invalid_argument, "control: text over 1 MiB");
    const auto live = members().live;
    for (int p = 0; p < o_.world; ++p)
      if (p != process_ && live[static_cast<std::size_t>(p)])
        if (auto st = send(p, tag_of(kind::text, key), control::pack_text(t)); !st) return st.error();
    return t;
  }
  auto m = take(leader(), tag_of(kind::text, key), o_.join_timeout, e);
  if (!m) return m.error();
  return control::text_of(m->body);
}

result<std::vector<std::string>> control_plane::all_gather_text(std::uint64_t key, const std::string& line,
                                                                std::optional<std::uint64_t> epoch) {
  if (line.find('\n') != std::string::npos || line.size() > (64u << 10))
    return make_error(errc::invalid_argument, "control: all_gather_text takes one line of at most 64 KiB");
  std::string joined;
  auto e = call_epoch(epoch);
  if (!e) return e.error();
  const std::uint64_t part_key = epoch_key(key, *e);
  if (!is_leader()) {
    if (auto st = send(leader(), tag_of(kind::text, part_key), control::pack_text(line)); !st) return st.error();
  } else {
    const auto live = members().live;
    for (int p = 0; p < o_.world; ++p) {
      if (p == process_) {
        joined += line + "\n";
        continue;
      }
      if (!live[static_cast<std::size_t>(p)]) {  // a process no longer in the job: an empty line
        joined += "\n";
        continue;
      }
      auto m = take(p, tag_of(kind::text, part_key), o_.join_timeout, *e);
      if (!m) return m.error();
      auto t = control::text_of(m->body);
      if (!t) return t.error();
      if (t->find('\n') != std::string::npos)
        return make_error(errc::io_error, "control: process " + std::to_string(p) + " sent several lines");
      joined += *t + "\n";
    }
  }
  // the result in the same epoch, even where the coordinator changed the membership right
  // after sending it (a leave): the epoch was checked when the collective began
  auto all = broadcast_in(key + 1, joined, *e);
  if (!all) return all.error();
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = all->find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(all->substr(start, nl - start));
  if (static_cast<int>(lines.size()) != o_.world)
    return make_error(errc::io_error, "control: " + std::to_string(lines.size()) + " lines for " +
                                          std::to_string(o_.world) + " processes");
  return lines;
}

result<std::vector<double>> control_plane::sum(std::uint64_t key, const std::vector<double>& values,
                                               std::optional<std::uint64_t> epoch) {
  auto e = call_epoch(epoch);
  if (!e) return e.error();
  key = epoch_key(key, *e);
  if (!is_leader()) {
    const int lead = leader();
    if (auto st = send(lead, tag_of(kind::sum_part, key), control::pack_doubles(values)); !st) return st.error();
    auto m = take(lead, tag_of(kind::sum_total, key), o_.join_timeout, *e);
    if (!m) return m.error();
    auto total = control::doubles_of(m->body);
    if (total.size() != values.size()) return make_error(errc::io_error, "control: a sum of the wrong length");
    return total;
  }
  // summed in process order, the coordinator's own part in its place: the same bits whoever leads
  std::vector<double> total;
  bool first = true;
  auto add = [&](const std::vector<double>& part) {
    if (first)
      total = part;
    else
      for (std::size_t i = 0; i < total.size(); ++i) total[i] += part[i];
    first = false;
  };
  const auto live = members().live;
  for (int p = 0; p < o_.world; ++p) {
    if (p == process_) {
      add(values);
      continue;
    }
    if (!live[static_cast<std::size_t>(p)]) continue;
    auto m = take(p, tag_of(kind::sum_part, key), o_.join_timeout, *e);
    if (!m) return m.error();
    auto part = control::doubles_of(m->body);
    if (part.size() != values.size())
      return make_error(errc::io_error, "control: process " + std::to_string(p) + " sent " +
                                            std::to_string(part.size()) + " values to a sum of " +
                                            std::to_string(values.size()));
    add(part);
  }
  for (int p = 0; p < o_.world; ++p)
    if (p != process_ && live[static_cast<std::size_t>(p)])
      if (auto st = send(p, tag_of(kind::sum_total, key), control::pack_doubles(total)); !st) return st.error();
  return total;
}

result<std::vector<tensor>> control_plane::gather(std::uint64_t key, const std::vector<std::pair<int, tensor>>& mine,
                                                  const std::vector<int>& owner) {
  auto e = call_epoch(std::nullopt);
  if (!e) return e.error();
  key = epoch_key(key, *e);
  if (!is_leader()) {
    for (const auto& [index, t] : mine) {
      auto& pe = peers_[static_cast<std::size_t>(leader())];
      const tensor c = t.is_contiguous() ? t : t.contiguous();
      std::lock_guard<std::mutex> lock(pe->write);
      if (auto st = control::write_message(pe->socket, o_.generation, tag_of(kind::piece, key),
                                           static_cast<std::uint32_t>(index), c, o_.join_timeout);
          !st)
        return st.error();
    }
    return std::vector<tensor>{};
  }
  std::vector<tensor> all(owner.size());
  std::vector<bool> have(owner.size(), false);
  for (const auto& [index, t] : mine) {
    if (index < 0 || static_cast<std::size_t>(index) >= owner.size())
      return make_error(errc::invalid_argument, "gather: bad index");
    all[static_cast<std::size_t>(index)] = t;
    have[static_cast<std::size_t>(index)] = true;
  }
  for (std::size_t i = 0; i < owner.size(); ++i) {
    if (owner[i] == process_) continue;
    auto m = take(owner[i], tag_of(kind::piece, key), o_.join_timeout, *e);
    if (!m) return m.error();
    const std::size_t index = m->source;
    if (index >= owner.size() || owner[index] != owner[i] || have[index])
      return make_error(errc::io_error, "control: process " + std::to_string(owner[i]) + " sent piece " +
                                            std::to_string(index) + ", which is not its to send");
    all[index] = std::move(m->body);
    have[index] = true;
  }
  for (std::size_t i = 0; i < owner.size(); ++i)
    if (!have[i]) return make_error(errc::invalid_argument, "gather: nobody holds piece " + std::to_string(i));
  return all;
}

}  // namespace cohort::transport
