// Tensor storage, views and strided copies.
#include "graph/tensor.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <map>
#include <mutex>

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace cohort {

namespace {

// Blocks of 4 MiB and more are their own mappings, 2 MiB aligned and advised to be transparent
// huge pages (the kernel's madvise mode): their first touch faults once per 2 MiB rather than
// once per 4 KiB. On this project's VMs a 4 KiB fault costs ~13 us: a fresh 24 MB block took
// 80 ms to fill, 3 ms in huge pages (a transition's state pieces, a checkpoint's snapshot).
constexpr std::size_t huge_page = std::size_t{2} << 20;
constexpr std::size_t huge_from = std::size_t{4} << 20;

std::byte* map_huge(std::size_t rounded) {
  // over-map by a huge page, then unmap the unaligned head and the tail
  const std::size_t span = rounded + huge_page;
  void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(m);
  const std::uintptr_t aligned = (at + huge_page - 1) / huge_page * huge_page;
  if (aligned > at) ::munmap(m, aligned - at);
  if (const std::size_t tail = at + span - (aligned + rounded); tail > 0)
    ::munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  (void)::madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);  // advice: 4 KiB pages where refused
  return reinterpret_cast<std::byte*>(aligned);
}

void release(std::byte* p, std::size_t rounded) {
  if (rounded >= huge_from)
    ::munmap(p, rounded);
  else
    std::free(p);
}

// Large blocks (256 KiB and up) are kept for reuse, up to 256 MiB in all: the allocator hands
// such blocks out as fresh mappings, and touching a fresh mapping costs a page fault per
// 4 KiB, which is what a training step allocating gradients or a transport receiving a
// 32 MiB piece would otherwise pay every time.
class block_cache {
 public:
  static constexpr std::size_t min_bytes = std::size_t{256} << 10, max_cached = std::size_t{256} << 20;
  std::byte* take(std::size_t rounded) {
    if (rounded < min_bytes) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(rounded);
    if (it == free_.end()) return nullptr;
    std::byte* p = it->second;
    free_.erase(it);
    cached_ -= rounded;
    return p;
  }
  void give(std::byte* p, std::size_t rounded) {
    if (rounded >= min_bytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + rounded <= max_cached) {
        free_.emplace(rounded, p);
        cached_ += rounded;
        return;
      }
    }
    release(p, rounded);
  }
  static block_cache& instance() {
    static auto* cache = new block_cache;  // never destroyed: storages may outlive statics
    return *cache;
  }

 private:
  std::mutex mutex_;
  std::multimap<std::size_t, std::byte*> free_;
  std::size_t cached_ = 0;
};

std::size_t rounded_bytes(std::size_t bytes) {
  if (bytes >= huge_from) return (bytes + huge_page - 1) / huge_page * huge_page;
  return bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
}

}  // namespace

storage::storage(std::size_t bytes) : bytes_(bytes) {
  const std::size_t rounded = rounded_bytes(bytes);
  data_ = block_cache::instance().take(rounded);
  if (data_ == nullptr)
    data_ = rounded >= huge_from ? map_huge(rounded) : static_cast<std::byte*>(std::aligned_alloc(64, rounded));
  if (data_ == nullptr) throw std::bad_alloc();
}

storage::~storage() { block_cache::instance().give(data_, rounded_bytes(bytes_)); }

tensor::tensor(std::shared_ptr<storage> st, cohort::shape s, dtype t, std::int64_t offset_elems)
    : storage_(std::move(st)), shape_(std::move(s)), offset_(offset_elems), dtype_(t) {
  strides_ = shape_.contiguous_strides();
}

tensor tensor::empty(cohort::shape s, dtype t) {
  auto bytes = static_cast<std::size_t>(s.numel()) * size_of(t);
  return tensor(std::make_shared<storage>(bytes), std::move(s), t);
}

tensor tensor::zeros(cohort::shape s, dtype t) {
  tensor out = empty(std::move(s), t);
  std::memset(out.storage_->data(), 0, out.storage_->bytes());
  return out;
}

tensor tensor::full(cohort::shape s, float value) {
  tensor out = empty(std::move(s), dtype::f32);
  out.fill(value);
  return out;
}

tensor tensor::from(cohort::shape s, std::span<const float> values) {
  if (static_cast<std::int64_t>(values.size()) != s.numel())
    throw std::invalid_argument("tensor::from: " + std::to_string(values.size()) + " values for shape " +
                                s.to_string());
  tensor out = empty(std::move(s), dtype::f32);
  std::memcpy(out.data<float>(), values.data(), values.size() * sizeof(float));
  return out;
}

tensor tensor::from_ints(cohort::shape s, std::span<const std::int32_t> values) {
  if (static_cast<std::int64_t>(values.size()) != s.numel())
    throw std::invalid_argument("tensor::from_ints: " + std::to_string(values.size()) + " values for shape " +
                                s.to_string());
  tensor out = empty(std::move(s), dtype::i32);
  std::memcpy(out.data<std::int32_t>(), values.data(), values.size() * sizeof(std::int32_t));
  return out;
}

bool tensor::is_contiguous() const { return strides_ == shape_.contiguous_strides(); }

namespace {

// Offset (in elements) of row-major flat index `flat` under `strides`.
std::int64_t strided_offset(const shape& s, const std::vector<std::int64_t>& strides, std::int64_t flat) {
  std::int64_t off = 0;
  for (int d = s.rank() - 1; d >= 0; --d) {
    off += (flat % s[d]) * strides[static_cast<std::size_t>(d)];
    flat /= s[d];
  }
  return off;
}

}  // namespace

float tensor::at(std::int64_t flat) const {
  std::int64_t off = strided_offset(shape_, strides_, flat);
  if (dtype_ == dtype::i32) return static_cast<float>(data<std::int32_t>()[off]);
  return data<float>()[off];
}

tensor tensor::reshape(cohort::shape s) const {
  if (s.numel() != numel() || !is_contiguous())
    throw std::invalid_argument("tensor::reshape: " + shape_.to_string() + " to " + s.to_string());
  tensor out = *this;
  out.shape_ = std::move(s);
  out.strides_ = out.shape_.contiguous_strides();
  return out;
}

tensor tensor::transpose(int d0, int d1) const {
  std::vector<int> perm(static_cast<std::size_t>(shape_.rank()));
  for (int i = 0; i < shape_.rank(); ++i) perm[static_cast<std::size_t>(i)] = i;
  std::swap(perm[static_cast<std::size_t>(d0)], perm[static_cast<std::size_t>(d1)]);
  return permute(perm);
}

tensor tensor::permute(const std::vector<int>& perm) const {
  tensor out = *this;
  std::vector<std::int64_t> dims(perm.size()), strides(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    dims[i] = shape_[perm[i]];
    strides[i] = strides_[static_cast<std::size_t>(perm[i])];
  }
  out.shape_ = cohort::shape(std::move(dims));
  out.strides_ = std::move(strides);
  return out;
}

tensor tensor::slice(int dim, std::int64_t start, std::int64_t end) const {
  tensor out = *this;
  out.shape_[dim] = end - start;
  out.offset_ += start * strides_[static_cast<std::size_t>(dim)];
  return out;
}

tensor tensor::contiguous(bool force) const {
  if (!force && is_contiguous()) return *this;
  tensor out = empty(shape_, dtype_);
  out.copy_from(*this);
  return out;
}

void tensor::copy_from(const tensor& src) {
  if (src.shape_ != shape_ || src.dtype_ != dtype_)
    throw std::invalid_argument("tensor::copy_from: " + src.shape_.to_string() + " into " + shape_.to_string());
  std::size_t elem = size_of(dtype_);
  if (is_contiguous() && src.is_contiguous()) {
    std::memmove(storage_->data() + offset_ * static_cast<std::int64_t>(elem),
                 src.storage_->data() + src.offset_ * static_cast<std::int64_t>(elem),
                 static_cast<std::size_t>(numel()) * elem);
    return;
  }
  auto* dst_bytes = storage_->data();
  const auto* src_bytes = src.storage_->data();
  for (std::int64_t i = 0, n = numel(); i < n; ++i) {
    auto so = src.offset_ + strided_offset(shape_, src.strides_, i);
    auto d = offset_ + strided_offset(shape_, strides_, i);
    std::memcpy(dst_bytes + d * static_cast<std::int64_t>(elem), src_bytes + so * static_cast<std::int64_t>(elem),
                elem);
  }
}

void tensor::fill(float value) {
  if (!is_contiguous()) throw std::invalid_argument("tensor::fill: needs a contiguous tensor");
  if (dtype_ == dtype::i32) {
    auto* p = data<std::int32_t>();
    for (std::int64_t i = 0, n = numel(); i < n; ++i) p[i] = static_cast<std::int32_t>(value);
    return;
  }
  auto* p = data<float>();
  for (std::int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
}

std::vector<float> tensor::to_vector() const {
  std::vector<float> out(static_cast<std::size_t>(numel()));
  for (std::int64_t i = 0, n = numel(); i < n; ++i) out[static_cast<std::size_t>(i)] = at(i);
  return out;
}

}  // namespace cohort
