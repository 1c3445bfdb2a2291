// Seeded parameter initialization.
#include "graph/init.hpp"

#include "graph/random.hpp"

namespace cohort {

tensor initial_value(const std::string& name, const shape& s, init_spec init, std::uint64_t seed) {
  tensor t = tensor::empty(s, dtype::f32);
  float* p = t.data<float>();
  std::int64_t n = t.numel();
  rng r(derive_seed(seed, name));
  switch (init.how) {
    case init_spec::kind::constant:
      for (std::int64_t i = 0; i < n; ++i) p[i] = init.a;
      break;
    case init_spec::kind::uniform:
      for (std::int64_t i = 0; i < n; ++i) p[i] = (2.f * r.uniform() - 1.f) * init.a;
      break;
    case init_spec::kind::normal:
      for (std::int64_t i = 0; i < n; ++i) p[i] = r.normal() * init.a;
      break;
  }
  return t;
}

parameter_store init_parameters(const graph& g, std::uint64_t seed) {
  parameter_store out;
  for (value_id id : g.parameters()) {
    const auto& v = g.value(id);
    out.emplace(v.name, initial_value(v.name, v.type.shape, v.init, seed));
  }
  return out;
}

}  // namespace cohort
