// A tensor: a shape, an element type, strides and an offset into shared storage.
// Copies of a tensor share its storage (like a shared_ptr); views (reshape, transpose,
// slice) share it too and only change shape, strides and offset. Kernels take contiguous
// tensors; contiguous() makes a packed copy when a view is not.
//
//   tensor t = tensor::zeros({2, 3});          // f32, contiguous, 64-byte aligned
//   t.data<float>()[4] = 1.f;                  // row 1, column 1
//   tensor tt = t.transpose(0, 1);             // [3,2] view, no copy
//   assert(tt.shares_storage_with(t) && !tt.is_contiguous());
//   tensor packed = tt.contiguous();           // [3,2], new storage
//   assert(packed.at(3) == 1.f);               // row 1, column 1 of the transpose
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "graph/dtype.hpp"
#include "graph/shape.hpp"

namespace cohort {

/// An owned, 64-byte-aligned byte buffer.
class storage {
 public:
  explicit storage(std::size_t bytes);
  ~storage();
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class tensor {
 public:
  tensor() = default;
  /// A contiguous tensor of `s` over `st`, starting `offset_elems` elements in.
  tensor(std::shared_ptr<storage> st, shape s, dtype t, std::int64_t offset_elems = 0);

  static tensor empty(shape s, dtype t = dtype::f32);  // uninitialized
  static tensor zeros(shape s, dtype t = dtype::f32);
  static tensor full(shape s, float value);
  static tensor from(shape s, std::span<const float> values);
  static tensor from_ints(shape s, std::span<const std::int32_t> values);

  bool defined() const { return storage_ != nullptr; }
  const cohort::shape& shape() const { return shape_; }
  dtype type() const { return dtype_; }
  std::int64_t numel() const { return shape_.numel(); }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  std::int64_t offset() const { return offset_; }
  bool is_contiguous() const;
  bool shares_storage_with(const tensor& other) const { return storage_ == other.storage_; }
  const std::shared_ptr<storage>& storage_ptr() const { return storage_; }

  /// The first element, as T (the offset is in elements of the tensor's dtype, so
  /// data<std::byte>() of a view points at its first byte).
  template <class T>
  T* data() {
    return reinterpret_cast<T*>(storage_->data() + offset_ * static_cast<std::int64_t>(size_of(dtype_)));
  }
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(storage_->data() + offset_ * static_cast<std::int64_t>(size_of(dtype_)));
  }
  /// Element `flat` in row-major order of the logical shape (honours strides; slow, for tests).
  float at(std::int64_t flat) const;

  // -- views (no copy) -------------------------------------------------------------------
  /// Same elements, new shape; requires a contiguous tensor and equal numel.
  tensor reshape(cohort::shape s) const;
  tensor transpose(int d0, int d1) const;
  tensor permute(const std::vector<int>& perm) const;
  /// Elements [start, end) along `dim`.
  tensor slice(int dim, std::int64_t start, std::int64_t end) const;

  // -- copies ----------------------------------------------------------------------------
  /// A packed row-major copy (or *this when already contiguous and `force` is false).
  tensor contiguous(bool force = false) const;
  tensor clone() const { return contiguous(true); }
  /// Copies `src` (same shape, any strides) into this tensor's elements.
  void copy_from(const tensor& src);
  void fill(float value);
  std::vector<float> to_vector() const;

 private:
  std::shared_ptr<storage> storage_;
  cohort::shape shape_;
  std::vector<std::int64_t> strides_;
  std::int64_t offset_ = 0;
  dtype dtype_ = dtype::f32;
};

}  // namespace cohort
