// Reshard execution: sends first (they never block in-process), then receives in plan order.
#include "transport/reshard.hpp"

namespace cohort::transport {
namespace {

tensor view_of(const tensor& t, const box& b) {
  tensor v = t;
  for (std::size_t k = 0; k < b.dims.size(); ++k) v = v.slice(static_cast<int>(k), b.dims[k].begin, b.dims[k].end);
  return v;
}

}  // namespace

status execute_reshard(channel& ch, const reshard_plan& plan, const tensor* in, tensor* out,
                       const collective_options& o) {
  const int me = ch.rank();
  if (out != nullptr) out->fill(0.f);
  for (const auto& m : plan.messages) {
    if (m.from != me) continue;
    if (in == nullptr)
      return make_error(errc::invalid_argument,
                        "reshard: rank " + std::to_string(me) + " must send but holds no piece");
    tensor piece = view_of(*in, m.from_box).contiguous(true);
    if (m.to == me) continue;  // placed below from `in` directly
    if (auto st = ch.send(m.to, o.tag, std::move(piece), o.timeout); !st) return st;
  }
  for (const auto& m : plan.messages) {
    if (m.to != me) continue;
    if (out == nullptr)
      return make_error(errc::invalid_argument,
                        "reshard: rank " + std::to_string(me) + " must receive but has no output");
    tensor piece;
    if (m.from == me) {
      piece = view_of(*in, m.from_box).contiguous(true);
    } else {
      auto got = ch.recv(m.from, o.tag, o.timeout);
      if (!got) return got.error();
      piece = std::move(*got);
    }
    if (piece.shape() != m.to_box.extent())
      return make_error(errc::invalid_argument, "reshard: a piece of " + piece.shape().to_string() + " from rank " +
                                                    std::to_string(m.from) + " for a box of " +
                                                    m.to_box.extent().to_string());
    tensor dst = view_of(*out, m.to_box);
    if (!m.add) {
      dst.copy_from(piece);
    } else {
      tensor sum = dst.contiguous(true);
      o.reduce(sum.data<float>(), piece.data<float>(), sum.numel());
      dst.copy_from(sum);
    }
  }
  return {};
}

}  // namespace cohort::transport
