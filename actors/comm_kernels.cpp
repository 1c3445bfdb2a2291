// Collective kernels over the in-process (or any) transport.
#include "actors/comm_kernels.hpp"

#include "graph/placement.hpp"
#include "transport/collectives.hpp"

namespace cohort::actors {
namespace {

struct call_setup {
  comm_context* ctx = nullptr;
  const std::vector<int>* group = nullptr;
  transport::collective_options options;
};

result<call_setup> setup(const kernels::kernel_call& c) {
  auto* ctx = static_cast<comm_context*>(c.context);
  const auto& a = std::get<collective_attrs>(c.op.attrs);
  if (ctx == nullptr || ctx->channel == nullptr)
    return make_error(errc::invalid_argument, std::string(to_string(c.op.kind)) + ": no communication context");
  auto it = ctx->groups.find(a.axis);
  if (it == ctx->groups.end())
    return make_error(errc::invalid_argument,
                      std::string(to_string(c.op.kind)) + ": no group for mesh axis '" + a.axis + "'");
  call_setup s{ctx, &it->second, {}};
  s.options.tag = (ctx->tag_space << 40) | (ctx->calls++ & ((1ull << 40) - 1));
  s.options.timeout = ctx->timeout;
  return s;
}

status allreduce(const kernels::kernel_call& c) {
  auto s = setup(c);
  if (!s) return s.error();
  c.out[0].copy_from(c.in[0]);
  return transport::allreduce(*s->ctx->channel, *s->group, c.out[0], s->options);
}

status all_gather(const kernels::kernel_call& c) {
  auto s = setup(c);
  if (!s) return s.error();
  const auto& a = std::get<collective_attrs>(c.op.attrs);
  auto pieces = transport::all_gather_pieces(*s->ctx->channel, *s->group, c.in[0], s->options);
  if (!pieces) return pieces.error();
  for (std::int64_t r = 0; r < a.parts; ++r) {
    range at = shard_part(shard{a.dim, a.granule, a.owner}, a.extent, a.parts, r);
    const tensor& piece = (*pieces)[static_cast<std::size_t>(r)];
    if (piece.shape()[a.dim] != at.size())
      return make_error(errc::invalid_argument, "all_gather: rank " + std::to_string(r) + " sent a piece of " +
                                                    piece.shape().to_string() + ", expected extent " +
                                                    std::to_string(at.size()));
    if (at.size() > 0) c.out[0].slice(a.dim, at.begin, at.end).copy_from(piece);
  }
  return {};
}

// Reduce-scatter along any dimension as an allreduce followed by this rank's slice: twice the
// traffic of a ring reduce-scatter, but it appears only in rare gradient fix-ups (the
// Megatron layout needs none). The flat, dimension-0 case of ZeRO uses the ring directly.
status reduce_scatter(const kernels::kernel_call& c) {
  auto s = setup(c);
  if (!s) return s.error();
  const auto& a = std::get<collective_attrs>(c.op.attrs);
  tensor whole = c.in[0].clone();
  if (auto st = transport::allreduce(*s->ctx->channel, *s->group, whole, s->options); !st) return st;
  range mine = shard_part(shard{a.dim, a.granule, a.owner}, a.extent, a.parts, a.index);
  c.out[0].copy_from(whole.slice(a.dim, mine.begin, mine.end));
  return {};
}

}  // namespace

void add_comm_kernels(kernels::dispatch_table& table) {
  table.set(op_kind::allreduce, allreduce);
  table.set(op_kind::all_gather, all_gather);
  table.set(op_kind::reduce_scatter, reduce_scatter);
}

}  // namespace cohort::actors
