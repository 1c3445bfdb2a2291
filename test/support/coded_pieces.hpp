// Parameter pieces filled with codes: each element of each parameter and optimizer slot holds
// a distinct integer (exact in f32) derived from its parameter's name, its global index and
// its slot, so that after any move between layouts — a transition, a checkpoint written under
// one plan and loaded under another — every element can be checked to be where it belongs.
//
//   auto states = cohort::test::coded_states(from_layouts, /*slots=*/2);    // primary pieces only
//   auto moved = apply_state_transfer(copies, states, to_layouts, 2, /*steps=*/7);
//   cohort::test::check_coded(to_layouts, moved, 2);                        // doctest CHECKs
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "actors/state_layout.hpp"

namespace cohort::test {

using actors::piece_layout;
using actors::piece_state;

// What element `i` (< 2^17) of parameter `name` holds in slot `slot` (0: the value): an integer
// below 2^24, so exact in f32, different for every element and slot of a parameter.
inline float code(const std::string& name, std::int64_t i, int slot) {
  const auto bucket = static_cast<std::int64_t>(std::hash<std::string>{}(name) % 16);
  return static_cast<float>((static_cast<std::int64_t>(slot) << 21) + (bucket << 17) + i);
}

// Old pieces filled with their elements' codes (primary pieces only, as a transition exports them).
inline std::vector<piece_state> coded_states(const std::vector<piece_layout>& layouts, std::size_t slots) {
  std::vector<piece_state> out(layouts.size());
  for (const auto& p : layouts) {
    if (!p.primary) continue;
    piece_state& s = out[static_cast<std::size_t>(p.rank)];
    s.values = tensor::full({p.size}, -1.f);
    for (std::size_t k = 0; k < slots; ++k) s.slots.push_back(tensor::full({p.size}, -1.f));
    for (const auto& part : p.parts) {
      std::int64_t at = part.offset;
      for (const auto& run : part.elements)
        for (std::int64_t i = run.begin; i < run.end; ++i, ++at) {
          s.values.data<float>()[at] = code(part.name, i, 0);
          for (std::size_t k = 0; k < slots; ++k)
            s.slots[k].data<float>()[at] = code(part.name, i, static_cast<int>(k) + 1);
        }
    }
  }
  return out;
}

// Every element of every new piece holds its own code.
inline void check_coded(const std::vector<piece_layout>& layouts, const std::vector<piece_state>& states,
                        std::size_t slots) {
  for (const auto& p : layouts) {
    const piece_state& s = states[static_cast<std::size_t>(p.rank)];
    if (!s.values.defined()) continue;  // another process's rank
    REQUIRE(s.values.numel() == p.size);
    std::int64_t wrong = 0, checked = 0;
    for (const auto& part : p.parts) {
      std::int64_t at = part.offset;
      for (const auto& run : part.elements)
        for (std::int64_t i = run.begin; i < run.end; ++i, ++at, ++checked) {
          wrong += s.values.data<float>()[at] != code(part.name, i, 0) ? 1 : 0;
          for (std::size_t k = 0; k < slots; ++k)
            wrong += s.slots[k].data<float>()[at] != code(part.name, i, static_cast<int>(k) + 1) ? 1 : 0;
        }
    }
    CAPTURE(p.rank);
    CHECK(checked == p.size);  // the parts tile the piece
    CHECK(wrong == 0);
  }
}

}  // namespace cohort::test
