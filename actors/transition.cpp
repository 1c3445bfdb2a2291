// The state exchange of a plan transition across processes.
#include "actors/transition.hpp"

#include <algorithm>

namespace cohort::actors {
namespace {

// The copies from process `a`'s old pieces to process `b`'s new pieces, in list order.
std::vector<const state_copy*> between(const std::vector<state_copy>& copies, const exchange_options& o, int a, int b) {
  std::vector<const state_copy*> out;
  for (const auto& c : copies)
    if (o.old_owner[static_cast<std::size_t>(c.from_rank)] == a &&
        o.new_owner[static_cast<std::size_t>(c.to_rank)] == b)
      out.push_back(&c);
  return out;
}

std::int64_t packed_size(const std::vector<const state_copy*>& cs, std::size_t slots) {
  std::int64_t n = 0;
  for (const auto* c : cs) n += c->count;
  return n * static_cast<std::int64_t>(1 + slots);
}

}  // namespace

double bytes_across_processes(const std::vector<state_copy>& copies, const exchange_options& o) {
  double elements = 0;
  for (const auto& c : copies)
    if (o.old_owner[static_cast<std::size_t>(c.from_rank)] != o.new_owner[static_cast<std::size_t>(c.to_rank)])
      elements += static_cast<double>(c.count);
  return elements * 4.0 * static_cast<double>(1 + o.slots);
}

result<exchanged_state> exchange_state(transport::fabric& old_fabric, const exchange_options& o,
                                       const std::vector<state_copy>& copies,
                                       const std::vector<piece_state>& old_states,
                                       const std::vector<piece_layout>& to) {
  exchanged_state out;
  out.states.resize(to.size());
  for (std::size_t r = 0; r < to.size(); ++r)
    if (o.new_owner[r] == o.process && (r >= o.kept.size() || o.kept[r] < 0))
      out.states[r] = empty_piece(to[r].size, o.slots, o.steps);
  for (const auto* c : between(copies, o, o.process, o.process))
    apply_copy(*c, old_states[static_cast<std::size_t>(c->from_rank)], out.states[static_cast<std::size_t>(c->to_rank)],
               o.slots);
  const std::vector<int>& on = o.fabric_owner.empty() ? o.old_owner : o.fabric_owner;
  auto first_rank_of = [&](int process) {
    for (std::size_t r = 0; r < on.size(); ++r)
      if (on[r] == process) return static_cast<int>(r);
    return -1;
  };
  const int me = first_rank_of(o.process);
  if (me < 0 && o.processes > 1) return make_error(errc::invalid_argument, "state exchange: this process has no rank");
  for (int q = 0; q < o.processes; ++q) {
    if (q == o.process) continue;
    const int them = first_rank_of(q);
    if (them < 0) {  // not on this fabric (a lost process): nothing may come from or go to it
      if (!between(copies, o, q, o.process).empty() || !between(copies, o, o.process, q).empty())
        return make_error(errc::invalid_argument,
                          "state exchange: process " + std::to_string(q) + " is not in the job any more");
      continue;
    }
    transport::channel& ch = old_fabric.endpoint(me);
    auto send = [&]() -> status {
      const auto cs = between(copies, o, o.process, q);
      tensor packed = tensor::empty({packed_size(cs, o.slots)});
      float* at = packed.data<float>();
      for (const auto* c : cs) {
        const piece_state& src = old_states[static_cast<std::size_t>(c->from_rank)];
        at = std::copy_n(src.values.data<float>() + c->from, c->count, at);
        for (std::size_t k = 0; k < o.slots; ++k) at = std::copy_n(src.slots[k].data<float>() + c->from, c->count, at);
      }
      return ch.send(them, o.tag, std::move(packed), o.timeout);
    };
    auto receive = [&]() -> status {
      const auto cs = between(copies, o, q, o.process);
      auto got = ch.recv(them, o.tag, o.timeout);
      if (!got)
        return make_error(got.error().code,
                          "state exchange with process " + std::to_string(q) + ": " + got.error().message);
      const std::int64_t want = packed_size(cs, o.slots);
      if (got->numel() != want || (want > 0 && got->type() != dtype::f32))
        return make_error(errc::io_error, "state exchange: process " + std::to_string(q) + " sent " +
                                              std::to_string(got->numel()) + " values, the plans need " +
                                              std::to_string(want));
      const tensor in = got->contiguous();
      const float* at = in.data<float>();
      for (const auto* c : cs) {
        piece_state& dst = out.states[static_cast<std::size_t>(c->to_rank)];
        std::copy_n(at, c->count, dst.values.data<float>() + c->to);
        at += c->count;
        for (std::size_t k = 0; k < o.slots; ++k) {
          std::copy_n(at, c->count, dst.slots[k].data<float>() + c->to);
          at += c->count;
        }
      }
      return {};
    };
    status st = o.process < q ? send() : receive();
    if (st) st = o.process < q ? receive() : send();
    if (!st) return st.error();
  }
  return out;
}

}  // namespace cohort::actors
