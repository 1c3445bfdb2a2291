// The CUDA runtime side of the backend: device count, NCCL version, error bookkeeping and
// device_buffer (cudaMalloc / cudaMemcpy / cudaFree).
#include <cuda_runtime_api.h>

#include <atomic>
#include <string>
#include <utility>

#ifdef COHORT_HAVE_NCCL
#include <nccl.h>
#endif

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace cohort::kernels::cuda {
namespace {

// cudaGetErrorString returns static strings, so keeping the pointer is safe.
std::atomic<const char*> last_error_text{"no error"};

errc code_for(cudaError_t e) {
  switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNotSupported:
      return errc::unsupported;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
      return errc::invalid_argument;
    default:
      return errc::io_error;
  }
}

}  // namespace

namespace detail {

void record(cudaError_t e) {
  if (e != cudaSuccess) last_error_text.store(cudaGetErrorString(e));
}

status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  record(e);
  return make_error(code_for(e),
                    std::string("cuda ") + what + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

}  // namespace detail

int device_count() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    detail::record(e);
    cudaGetLastError();  // reset the runtime's last-error slot: later checks see new errors only
    return 0;
  }
  return n;
}

const char* runtime_error_text() { return last_error_text.load(); }

int nccl_version() {
#ifdef COHORT_HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return -1;
  return v;
#else
  return -1;
#endif
}

// -- device_buffer ----------------------------------------------------------------------------

result<device_buffer> device_buffer::allocate(std::int64_t count) {
  if (count < 0)
    return make_error(errc::invalid_argument, "cuda device_buffer: negative element count " + std::to_string(count));
  device_buffer b;
  if (count == 0) return b;
  void* p = nullptr;
  std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
  std::string what = "cudaMalloc(" + std::to_string(bytes) + " bytes)";
  if (auto st = detail::check(cudaMalloc(&p, bytes), what.c_str()); !st) return st.error();
  b.data_ = static_cast<float*>(p);
  b.size_ = count;
  return b;
}

device_buffer::~device_buffer() {
  if (data_ != nullptr) detail::record(cudaFree(data_));
}

device_buffer::device_buffer(device_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) detail::record(cudaFree(data_));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

status device_buffer::copy_from_host(std::span<const float> host) {
  if (static_cast<std::int64_t>(host.size()) != size_)
    return make_error(errc::shape_mismatch, "cuda copy_from_host: " + std::to_string(host.size()) +
                                                " host floats into a buffer of " + std::to_string(size_));
  if (size_ == 0) return {};
  return detail::check(cudaMemcpy(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice),
                       "cudaMemcpy host to device");
}

status device_buffer::copy_to_host(std::span<float> host) const {
  if (static_cast<std::int64_t>(host.size()) != size_)
    return make_error(errc::shape_mismatch, "cuda copy_to_host: a buffer of " + std::to_string(size_) +
                                                " floats into " + std::to_string(host.size()) + " host floats");
  if (size_ == 0) return {};
  return detail::check(cudaMemcpy(host.data(), data_, host.size_bytes(), cudaMemcpyDeviceToHost),
                       "cudaMemcpy device to host");
}

}  // namespace cohort::kernels::cuda
