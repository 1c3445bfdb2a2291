// Names of the op kinds, for messages and graph dumps.
#include "graph/op.hpp"

namespace cohort {

const char* to_string(op_kind k) {
  switch (k) {
    case op_kind::matmul:
      return "matmul";
    case op_kind::add:
      return "add";
    case op_kind::sub:
      return "sub";
    case op_kind::mul:
      return "mul";
    case op_kind::div:
      return "div";
    case op_kind::bias_add:
      return "bias_add";
    case op_kind::scale:
      return "scale";
    case op_kind::relu:
      return "relu";
    case op_kind::gelu:
      return "gelu";
    case op_kind::tanh:
      return "tanh";
    case op_kind::softmax:
      return "softmax";
    case op_kind::log_softmax:
      return "log_softmax";
    case op_kind::softmax_cross_entropy:
      return "softmax_cross_entropy";
    case op_kind::mse:
      return "mse";
    case op_kind::layernorm:
      return "layernorm";
    case op_kind::embedding:
      return "embedding";
    case op_kind::reshape:
      return "reshape";
    case op_kind::permute:
      return "permute";
    case op_kind::slice:
      return "slice";
    case op_kind::concat:
      return "concat";
    case op_kind::sum:
      return "sum";
    case op_kind::mean:
      return "mean";
    case op_kind::causal_mask:
      return "causal_mask";
    case op_kind::attention:
      return "attention";
    case op_kind::embedding_bag:
      return "embedding_bag";
    case op_kind::pairwise_dot:
      return "pairwise_dot";
    case op_kind::bce_with_logits:
      return "bce_with_logits";
    case op_kind::sum_to:
      return "sum_to";
    case op_kind::broadcast_to:
      return "broadcast_to";
    case op_kind::relu_grad:
      return "relu_grad";
    case op_kind::gelu_grad:
      return "gelu_grad";
    case op_kind::tanh_grad:
      return "tanh_grad";
    case op_kind::softmax_grad:
      return "softmax_grad";
    case op_kind::log_softmax_grad:
      return "log_softmax_grad";
    case op_kind::softmax_cross_entropy_grad:
      return "softmax_cross_entropy_grad";
    case op_kind::mse_grad:
      return "mse_grad";
    case op_kind::layernorm_grad:
      return "layernorm_grad";
    case op_kind::embedding_grad:
      return "embedding_grad";
    case op_kind::slice_grad:
      return "slice_grad";
    case op_kind::attention_grad:
      return "attention_grad";
    case op_kind::embedding_bag_grad:
      return "embedding_bag_grad";
    case op_kind::embedding_bag_sparse_grad:
      return "embedding_bag_sparse_grad";
    case op_kind::pairwise_dot_grad:
      return "pairwise_dot_grad";
    case op_kind::bce_with_logits_grad:
      return "bce_with_logits_grad";
    case op_kind::allreduce:
      return "allreduce";
    case op_kind::all_gather:
      return "all_gather";
    case op_kind::reduce_scatter:
      return "reduce_scatter";
    case op_kind::count_:
      break;
  }
  return "?";
}

}  // namespace cohort
