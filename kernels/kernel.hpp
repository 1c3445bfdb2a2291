// The signature every kernel has, and the dispatch table that maps each op to one.
// A kernel reads contiguous input tensors and writes into pre-allocated contiguous
// output tensors; it never allocates. It returns an error only for bad data that shape
// inference cannot see (an embedding id or class label out of range).
//
//   graph g;
//   var x = g.input("x", {2, 3});
//   var y = relu(x);
//   std::vector<tensor> in{tensor::full({2, 3}, -1.f)};
//   std::vector<tensor> out{tensor::empty({2, 3})};           // pre-allocated: a kernel never allocates
//   kernel_call call{g.nodes().back(), in, out};              // c.in[0] -> c.out[0]
//   dispatch_table t = cpu_kernels();                         // kernels/dispatch.hpp
//   if (status st = t[op_kind::relu](call); !st) return st;   // out[0] is all zeros
#pragma once

#include <array>
#include <span>

#include "graph/error.hpp"
#include "graph/graph.hpp"
#include "graph/tensor.hpp"

namespace cohort::kernels {

class thread_pool;

struct kernel_call {
  const node& op;
  std::span<const tensor> in;
  std::span<tensor> out;
  thread_pool* pool = nullptr;  // null: run on the calling thread only
  void* context = nullptr;      // what the table's owner gives its kernels (the runtime's
                                // collectives find their channel here); null for math kernels
};

using kernel_fn = status (*)(const kernel_call&);

/// op_kind -> kernel. Built by one explicit function per backend (dispatch.cpp).
class dispatch_table {
 public:
  /// The runtime adds its communication kernels to a copy of a math table.
  kernel_fn operator[](op_kind k) const { return fns_[static_cast<std::size_t>(k)]; }
  void set(op_kind k, kernel_fn f) { fns_[static_cast<std::size_t>(k)] = f; }
  const char* name() const { return name_; }
  explicit dispatch_table(const char* name) : name_(name) {}

 private:
  std::array<kernel_fn, op_count> fns_{};
  const char* name_;
};

}  // namespace cohort::kernels
