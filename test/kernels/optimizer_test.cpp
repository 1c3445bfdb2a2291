// SGD, AdamW and Adagrad against the update rules of torch.optim written out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/optimizer.hpp"

using namespace cohort;
using namespace cohort::kernels;

TEST_CASE("SGD with momentum and weight decay follows torch.optim.SGD") {
  sgd_config c{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f};
  tensor p = tensor::full({1}, 1.f);
  auto st = make_state(p, c);
  REQUIRE(st.slots.size() == 1);
  tensor g = tensor::full({1}, 0.5f);
  double pv = 1.0, buf = 0.0;
  for (int step = 0; step < 3; ++step) {
    apply_update(p, g, st, c);
    double d = 0.5 + 0.01 * pv;
    buf = step == 0 ? d : 0.9 * buf + d;
    pv -= 0.1 * buf;
    CHECK(p.at(0) == doctest::Approx(pv).epsilon(1e-6));
  }
  CHECK(st.step == 3);
}

TEST_CASE("Nesterov SGD follows torch.optim.SGD, over a vector long enough to vectorize") {
  sgd_config c{.lr = 0.05f, .momentum = 0.8f, .weight_decay = 0.02f, .nesterov = true};
  const std::int64_t n = 37;  // not a multiple of any vector width
  tensor p = tensor::zeros({n});
  tensor g = tensor::zeros({n});
  std::vector<double> pv(n), buf(n, 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    pv[i] = 0.1 * static_cast<double>(i) - 1.0;
    p.data<float>()[i] = static_cast<float>(pv[i]);
  }
  auto st = make_state(p, c);
  for (int step = 0; step < 3; ++step) {
    for (std::int64_t i = 0; i < n; ++i)
      g.data<float>()[i] = static_cast<float>(0.01 * static_cast<double>(i * (step + 1)) - 0.2);
    apply_update(p, g, st, c);
    for (std::int64_t i = 0; i < n; ++i) {
      double d = static_cast<double>(g.at(i)) + 0.02 * pv[i];
      buf[i] = step == 0 ? d : 0.8 * buf[i] + d;
      pv[i] -= 0.05 * (d + 0.8 * buf[i]);
      CHECK(p.at(i) == doctest::Approx(pv[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("plain SGD keeps no state") {
  sgd_config c{.lr = 0.5f};
  tensor p = tensor::full({2}, 1.f);
  auto st = make_state(p, c);
  CHECK(st.slots.empty());
  apply_update(p, tensor::full({2}, 0.25f), st, c);
  CHECK(p.at(1) == 0.875f);
}

TEST_CASE("AdamW follows torch.optim.AdamW with decoupled weight decay") {
  adamw_config c{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  tensor p = tensor::full({1}, 2.f);
  auto st = make_state(p, c);
  REQUIRE(st.slots.size() == 2);
  double pv = 2.0, m = 0, v = 0;
  const double grads[] = {0.3, -0.2, 0.7};
  for (int t = 1; t <= 3; ++t) {
    double gv = grads[t - 1];
    apply_update(p, tensor::full({1}, static_cast<float>(gv)), st, c);
    pv *= 1 - 1e-2 * 0.1;
    m = 0.9 * m + 0.1 * gv;
    v = 0.95 * v + 0.05 * gv * gv;
    double step = 1e-2 / (1 - std::pow(0.9, t));
    double denom = std::sqrt(v) / std::sqrt(1 - std::pow(0.95, t)) + 1e-8;
    pv -= step * m / denom;
    CHECK(p.at(0) == doctest::Approx(pv).epsilon(1e-5));
  }
}

TEST_CASE("Adagrad follows torch.optim.Adagrad and leaves a row without gradient as it is") {
  adagrad_config c{.lr = 0.1f, .eps = 1e-10f};
  tensor p = tensor::full({2}, 1.f);
  auto st = make_state(p, c);
  REQUIRE(st.slots.size() == 1);
  double pv = 1.0, sum = 0;
  const double grads[] = {0.5, -0.25, 1.0};
  for (double gv : grads) {
    tensor g = tensor::zeros({2});
    g.data<float>()[0] = static_cast<float>(gv);
    apply_update(p, g, st, c);
    sum += gv * gv;
    pv -= 0.1 * gv / (std::sqrt(sum) + 1e-10);
    CHECK(p.at(0) == doctest::Approx(pv).epsilon(1e-6));
    CHECK(p.at(1) == 1.f);  // a zero gradient: sum and value unchanged
    CHECK(st.slots[0].at(1) == 0.f);
  }
}
