// The dispatch tables: which kernel runs each op, one explicit function per backend.
// No static registration: a missing row is a test failure (every_op_has_a_kernel).
//
//   dispatch_table ref = reference_kernels();   // plain loops, the oracle
//   dispatch_table cpu = cpu_kernels();         // OpenBLAS + vectorized loops, reference where none
//   assert(cpu[op_kind::matmul] != nullptr && cpu[op_kind::allreduce] == nullptr);   // the runtime adds those
#pragma once

#include "kernels/kernel.hpp"

namespace cohort::kernels {

dispatch_table reference_kernels();
dispatch_table cpu_kernels();

}  // namespace cohort::kernels
