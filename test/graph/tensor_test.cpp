// Tensors: shared storage, views, strided copies.
#include <doctest/doctest.h>

#include "graph/tensor.hpp"

using namespace cohort;

namespace {
tensor iota(shape s) {
  tensor t = tensor::empty(std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}
}  // namespace

TEST_CASE("copies share storage, clone does not") {
  tensor a = tensor::zeros({2, 3});
  tensor b = a;
  b.data<float>()[4] = 5.f;
  CHECK(a.at(4) == 5.f);
  tensor c = a.clone();
  c.data<float>()[4] = 1.f;
  CHECK(a.at(4) == 5.f);
  CHECK_FALSE(c.shares_storage_with(a));
  CHECK(reinterpret_cast<std::uintptr_t>(a.data<float>()) % 64 == 0);
}

TEST_CASE("transpose, permute and slice are views with strides") {
  tensor t = iota({2, 3});
  tensor tt = t.transpose(0, 1);
  CHECK(tt.shape() == shape{3, 2});
  CHECK_FALSE(tt.is_contiguous());
  CHECK(tt.shares_storage_with(t));
  CHECK(tt.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  tensor packed = tt.contiguous();
  CHECK(packed.is_contiguous());
  CHECK(packed.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  tensor s = iota({3, 4}).slice(1, 1, 3);
  CHECK(s.shape() == shape{3, 2});
  CHECK(s.to_vector() == std::vector<float>{1, 2, 5, 6, 9, 10});
  tensor p = iota({2, 3, 4}).permute({2, 0, 1});
  CHECK(p.shape() == shape{4, 2, 3});
  CHECK(p.at(1) == 4.f);  // p[0][0][1] = t[0][1][0]
}

TEST_CASE("reshape needs contiguity and equal size, copy_from writes through views") {
  tensor t = iota({2, 6});
  CHECK(t.reshape({3, 4}).at(5) == 5.f);
  CHECK_THROWS_AS(t.reshape({5}), std::invalid_argument);
  CHECK_THROWS_AS(t.transpose(0, 1).reshape({12}), std::invalid_argument);
  tensor z = tensor::zeros({2, 6});
  tensor window = z.slice(1, 2, 4);
  window.copy_from(tensor::full({2, 2}, 7.f));
  CHECK(z.to_vector() == std::vector<float>{0, 0, 7, 7, 0, 0, 0, 0, 7, 7, 0, 0});
}

TEST_CASE("the bytes of a view start at the view's first element") {
  tensor t = iota({4, 3});
  tensor row2 = t.slice(0, 2, 3);
  CHECK(row2.data<float>()[0] == 6.f);
  CHECK(reinterpret_cast<const float*>(row2.data<std::byte>())[0] == 6.f);
  tensor flat_view(t.storage_ptr(), {5}, dtype::f32, 7);
  CHECK(reinterpret_cast<const float*>(flat_view.data<std::byte>())[0] == 7.f);
}

TEST_CASE("integer tensors") {
  std::int32_t v[] = {3, 1, 4};
  tensor t = tensor::from_ints({3}, v);
  CHECK(t.type() == dtype::i32);
  CHECK(t.at(2) == 4.f);
  CHECK(size_of(dtype::bf16) == 2);
}
