// The CUDA backend (kernels/cuda/) against the plain-loop reference kernels: ReLU and GELU
// forward/backward and cuBLAS SGEMM in all four transpose combinations, on random and odd
// sizes (1, primes). Without a device (or driver) the GPU comparisons say so in a doctest
// MESSAGE and pass; the NCCL version and the error paths are checked everywhere.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "graph/random.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/dispatch.hpp"
#include "support/tensor_checks.hpp"

using namespace cohort;
using namespace cohort::test;
namespace cu = cohort::kernels::cuda;

namespace {

const float elementwise_rtol = 1e-5f, elementwise_atol = 1e-6f;
const float sgemm_rtol = 1e-4f, sgemm_atol = 1e-4f;

bool have_device() {
  if (cu::device_count() > 0) return true;
  MESSAGE("no CUDA device (" << std::string(cu::runtime_error_text()) << "): GPU kernel comparison skipped");
  return false;
}

// Fixed sizes (1, small primes, a prime past one block and past the grid cap's first
// sweep) plus a few random ones.
std::vector<std::int64_t> elementwise_sizes() {
  std::vector<std::int64_t> sizes{1, 2, 3, 7, 31, 257, 4099, 65537, 1000003};
  rng r(7);
  for (int i = 0; i < 4; ++i) sizes.push_back(1 + static_cast<std::int64_t>(r.below(200000)));
  return sizes;
}

// Normal * 2 (reaches the GELU tails), with exact and extreme values at the front.
tensor elementwise_input(std::int64_t n, std::uint64_t seed) {
  tensor t = random_tensor({n}, seed, 2.f);
  const float special[] = {0.f, -0.f, 1e-30f, -1e-30f, 40.f, -40.f, 8.f, -8.f};
  for (std::int64_t i = 0; i < n && i < 8; ++i) t.data<float>()[i] = special[i];
  return t;
}

// One reference kernel through the dispatch table, on a hand-built node.
tensor run_reference(op_kind kind, op_attrs attrs, std::vector<tensor> in, const shape& out_shape) {
  const kernels::dispatch_table table = kernels::reference_kernels();
  node op{kind, attrs, {}, {}, "cuda_test"};
  std::vector<tensor> out{tensor::empty(out_shape)};
  kernels::kernel_call call{op, in, out};
  status st = table[kind](call);
  REQUIRE_MESSAGE(st.ok(), st.error().message);
  return out[0];
}

using launch_fn = std::function<status(const std::vector<const float*>& in, float* out)>;

// Copies `in` to the device, runs `launch`, and copies its output (out_shape) back.
tensor run_device(const std::vector<tensor>& in, const shape& out_shape, const launch_fn& launch) {
  std::vector<cu::device_buffer> buffers;
  std::vector<const float*> ptrs;
  for (const tensor& t : in) {
    auto b = cu::device_buffer::allocate(t.numel());
    REQUIRE_MESSAGE(b.ok(), b.error().message);
    status st = b->copy_from_host({t.data<float>(), static_cast<std::size_t>(t.numel())});
    REQUIRE_MESSAGE(st.ok(), st.error().message);
    ptrs.push_back(b->data());
    buffers.push_back(std::move(*b));
  }
  auto out = cu::device_buffer::allocate(out_shape.numel());
  REQUIRE_MESSAGE(out.ok(), out.error().message);
  status st = launch(ptrs, out->data());
  REQUIRE_MESSAGE(st.ok(), st.error().message);
  tensor y = tensor::empty(out_shape);
  st = out->copy_to_host({y.data<float>(), static_cast<std::size_t>(y.numel())});
  REQUIRE_MESSAGE(st.ok(), st.error().message);
  return y;
}

// A unary kernel (relu_forward, gelu_forward) against its reference op on every size.
void check_unary(op_kind kind, status (*fn)(const float*, float*, std::int64_t)) {
  for (std::int64_t n : elementwise_sizes()) {
    CAPTURE(n);
    tensor x = elementwise_input(n, static_cast<std::uint64_t>(n));
    tensor expected = run_reference(kind, no_attrs{}, {x}, x.shape());
    tensor got =
        run_device({x}, x.shape(), [&](const std::vector<const float*>& in, float* out) { return fn(in[0], out, n); });
    CHECK_MESSAGE(close(got, expected, elementwise_rtol, elementwise_atol),
                  describe_mismatch(got, expected, elementwise_rtol, elementwise_atol));
  }
}

// A gradient kernel (dy, x) -> dx against its reference op on every size.
void check_grad(op_kind kind, status (*fn)(const float*, const float*, float*, std::int64_t)) {
  for (std::int64_t n : elementwise_sizes()) {
    CAPTURE(n);
    tensor dy = random_tensor({n}, static_cast<std::uint64_t>(n) + 11);
    tensor x = elementwise_input(n, static_cast<std::uint64_t>(n));
    tensor expected = run_reference(kind, no_attrs{}, {dy, x}, x.shape());
    auto launch = [&](const std::vector<const float*>& in, float* out) { return fn(in[0], in[1], out, n); };
    tensor got = run_device({dy, x}, x.shape(), launch);
    CHECK_MESSAGE(close(got, expected, elementwise_rtol, elementwise_atol),
                  describe_mismatch(got, expected, elementwise_rtol, elementwise_atol));
  }
}

}  // namespace

TEST_CASE("NCCL links and reports its version") {
  int v = cu::nccl_version();
#ifdef COHORT_HAVE_NCCL
  MESSAGE("NCCL version code " << v);
  CHECK(v > 0);
  CHECK(v / 10000 >= 2);  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch (2.x)
#else
  CHECK(v == -1);
#endif
}

TEST_CASE("bad arguments and a missing device are errors, not crashes") {
  auto neg = cu::device_buffer::allocate(-1);
  REQUIRE_FALSE(neg.ok());
  CHECK(neg.error().code == errc::invalid_argument);
  CHECK(cu::relu_forward(nullptr, nullptr, -3).error().code == errc::invalid_argument);
  CHECK(cu::sgemm(false, false, -1, 2, 2, nullptr, nullptr, nullptr).error().code == errc::invalid_argument);
  CHECK(cu::relu_forward(nullptr, nullptr, 0).ok());  // nothing to do, no device needed
  CHECK(cu::sgemm(false, false, 0, 5, 5, nullptr, nullptr, nullptr).ok());

  auto empty = cu::device_buffer::allocate(0);
  REQUIRE(empty.ok());
  CHECK(empty->data() == nullptr);
  const float three[] = {1.f, 2.f, 3.f};
  CHECK(empty->copy_from_host(three).error().code == errc::shape_mismatch);

  if (cu::device_count() > 0) return;
  // No device or no driver: every call that needs one fails with a status naming it.
  auto b = cu::device_buffer::allocate(16);
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().code == errc::unsupported);
  CHECK(b.error().message.find("cudaMalloc") != std::string::npos);
  CHECK(std::string(cu::runtime_error_text()) != "no error");
  status st = cu::relu_forward(nullptr, nullptr, 8);
  CHECK_FALSE(st.ok());
  MESSAGE("relu_forward without a device: " << st.error().message);
  st = cu::sgemm(false, false, 2, 2, 2, nullptr, nullptr, nullptr);
  CHECK_FALSE(st.ok());
  MESSAGE("sgemm without a device: " << st.error().message);
}

TEST_CASE("CUDA relu_forward matches the reference relu") {
  if (!have_device()) return;
  check_unary(op_kind::relu, cu::relu_forward);
}

TEST_CASE("CUDA relu_backward matches the reference relu_grad") {
  if (!have_device()) return;
  check_grad(op_kind::relu_grad, cu::relu_backward);
}

TEST_CASE("CUDA gelu_forward matches the reference gelu") {
  if (!have_device()) return;
  check_unary(op_kind::gelu, cu::gelu_forward);
}

TEST_CASE("CUDA gelu_backward matches the reference gelu_grad") {
  if (!have_device()) return;
  check_grad(op_kind::gelu_grad, cu::gelu_backward);
}

TEST_CASE("cuBLAS sgemm matches the reference matmul for every transpose combination") {
  if (!have_device()) return;
  struct mnk {
    int m, n, k;
  };
  std::vector<mnk> shapes{{1, 1, 1}, {1, 7, 3}, {7, 1, 5}, {13, 17, 1}, {31, 29, 37}, {64, 96, 128}, {127, 131, 67}};
  rng r(3);
  for (int i = 0; i < 4; ++i)
    shapes.push_back(
        {1 + static_cast<int>(r.below(200)), 1 + static_cast<int>(r.below(200)), 1 + static_cast<int>(r.below(200))});
  std::uint64_t seed = 100;
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true})
      for (const mnk& s : shapes) {
        CAPTURE(trans_a);
        CAPTURE(trans_b);
        CAPTURE(s.m);
        CAPTURE(s.n);
        CAPTURE(s.k);
        tensor a = random_tensor(trans_a ? shape{s.k, s.m} : shape{s.m, s.k}, ++seed);
        tensor b = random_tensor(trans_b ? shape{s.n, s.k} : shape{s.k, s.n}, ++seed);
        shape out_shape{s.m, s.n};
        tensor expected = run_reference(op_kind::matmul, matmul_attrs{trans_a, trans_b}, {a, b}, out_shape);
        auto launch = [&](const std::vector<const float*>& in, float* c) {
          return cu::sgemm(trans_a, trans_b, s.m, s.n, s.k, in[0], in[1], c);
        };
        tensor got = run_device({a, b}, out_shape, launch);
        CHECK_MESSAGE(close(got, expected, sgemm_rtol, sgemm_atol),
                      describe_mismatch(got, expected, sgemm_rtol, sgemm_atol));
      }
}
