// Learnable toy data for the equivalence and transition suites: an MLP's labels from a fixed
// linear teacher, a GPT's windows of a fixed byte string, a DLRM's clicks from its first
// table's row and a dense feature; all deterministic by step.
#pragma once

#include <map>
#include <string>

#include "apps/models/dlrm.hpp"
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

// DLRM: three small tables of different bag lengths (one averaged), short bags padded.
inline apps::dlrm_config toy_dlrm() {
  apps::dlrm_config c;
  c.dense = 4;
  c.dim = 6;
  c.bottom = {12};
  c.top = {10};
  c.tables = {{"a", 7, 1, false}, {"b", 11, 3, true}, {"c", 5, 2, false}};
  return c;
}

inline batch_fn dlrm_data(std::int64_t batch) {
  return [batch](std::int64_t step) {
    rng r(300 + static_cast<std::uint64_t>(step));
    std::map<std::string, tensor> m;
    tensor dense = tensor::empty({batch, 4}), label = tensor::empty({batch});
    for (std::int64_t i = 0; i < batch * 4; ++i) dense.data<float>()[i] = r.normal();
    for (const auto& t : toy_dlrm().tables) {
      tensor ids = tensor::empty({batch, t.bag}, dtype::i32);
      for (std::int64_t i = 0; i < batch * t.bag; ++i) {
        const bool pad = i % t.bag != 0 && r.below(3) == 0;  // every bag keeps its first id
        ids.data<std::int32_t>()[i] = pad ? bag_padding : static_cast<std::int32_t>(r.below(t.rows));
      }
      m[t.input] = ids;
    }
    for (std::int64_t i = 0; i < batch; ++i)
      label.data<float>()[i] =
          (m["a"].data<std::int32_t>()[i] % 2 == 0) != (dense.data<float>()[i * 4] > 0.5f) ? 1.f : 0.f;
    m["dense"] = dense;
    m["label"] = label;
    return m;
  };
}

}  // namespace cohort::test
