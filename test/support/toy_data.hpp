// Learnable toy data for the equivalence and transition suites: an MLP's labels from a fixed
// linear teacher, a GPT's windows of a fixed byte string; both deterministic by step.
#pragma once

#include <map>
#include <string>

#include "graph/random.hpp"
#include "support/runtime_runner.hpp"

namespace cohort::test {

// MLP: 3 layers (fc1 column, fc2 row, fc3 replicated); labels from a fixed linear teacher.
inline batch_fn mlp_data(std::int64_t batch) {
  return [batch](std::int64_t step) {
    rng r(1000 + static_cast<std::uint64_t>(step));
    tensor x = tensor::empty({batch, 24});
    tensor y = tensor::empty({batch}, dtype::i32);
    for (std::int64_t i = 0; i < batch; ++i) {
      float best = -1e30f;
      for (std::int64_t j = 0; j < 24; ++j) x.data<float>()[i * 24 + j] = r.normal();
      for (int c = 0; c < 10; ++c) {
        float s = 0;
        for (std::int64_t j = 0; j < 24; ++j)
          s += x.data<float>()[i * 24 + j] * static_cast<float>((j * 7 + c * 3) % 5 - 2);
        if (s > best) {
          best = s;
          y.data<std::int32_t>()[i] = c;
        }
      }
    }
    return std::map<std::string, tensor>{{"x", x}, {"y", y}};
  };
}

// GPT: windows of a fixed byte string.
inline batch_fn gpt_data(std::int64_t batch, std::int64_t seq) {
  return [batch, seq](std::int64_t step) {
    static const std::string text =
        "cohort splits one training step over data, tensor and pipeline parallel ranks and must "
        "train exactly like the serial program; every plan is checked against it, step by step.";
    rng r(7 + static_cast<std::uint64_t>(step));
    tensor tokens = tensor::empty({batch, seq}, dtype::i32), targets = tensor::empty({batch, seq}, dtype::i32);
    for (std::int64_t b = 0; b < batch; ++b) {
      auto at = static_cast<std::int64_t>(r.below(text.size() - static_cast<std::size_t>(seq) - 1));
      for (std::int64_t t = 0; t < seq; ++t) {
        tokens.data<std::int32_t>()[b * seq + t] = static_cast<unsigned char>(text[static_cast<std::size_t>(at + t)]);
        targets.data<std::int32_t>()[b * seq + t] =
            static_cast<unsigned char>(text[static_cast<std::size_t>(at + t + 1)]);
      }
    }
    return std::map<std::string, tensor>{{"tokens", tokens}, {"targets", targets}};
  };
}

}  // namespace cohort::test
