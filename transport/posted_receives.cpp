// Posted receives: matching a beginning frame against the posting of its destination rank.
#include "transport/posted_receives.hpp"

namespace cohort::transport {

void posted_receives::post(int me, int from, std::uint64_t tag, const tensor& into) {
  entries_.at(static_cast<std::size_t>(me)) = {state::waiting, from, tag, into};
}

std::optional<tensor> posted_receives::claim(int to, int from, std::uint64_t tag, dtype type, const shape& s) {
  if (to < 0 || static_cast<std::size_t>(to) >= entries_.size()) return std::nullopt;
  entry& e = entries_[static_cast<std::size_t>(to)];
  if (e.at != state::waiting || e.from != from || e.tag != tag || e.into.type() != type ||
      e.into.numel() != s.numel() || !e.into.is_contiguous())
    return std::nullopt;
  e.at = state::landing;
  return tensor(e.into.storage_ptr(), s, type, e.into.offset());
}

void posted_receives::complete(int to, const tensor& body) {
  if (aliases(to, body)) entries_[static_cast<std::size_t>(to)].at = state::landed;
}

posted_receives::state posted_receives::withdraw(int me) {
  entry& e = entries_.at(static_cast<std::size_t>(me));
  const state s = e.at;
  e = entry{};
  return s;
}

bool posted_receives::aliases(int to, const tensor& body) const {
  if (to < 0 || static_cast<std::size_t>(to) >= entries_.size()) return false;
  const entry& e = entries_[static_cast<std::size_t>(to)];
  return e.at != state::none && body.storage_ptr() && body.storage_ptr() == e.into.storage_ptr() &&
         body.offset() == e.into.offset();
}

}  // namespace cohort::transport
