// allreduce(): recursive doubling for small buffers on power-of-two groups, the ring otherwise. Recursive doubling: at step k rank i exchanges its whole running sum
// with the rank whose group index differs in bit k and folds the partner's sum into its own;
// after log2 n steps every rank holds the total. The two partners of a step add the same two
// values (a + b on one, b + a on the other), so all ranks end with identical bits.
#include <bit>

#include "transport/collectives.hpp"
#include "transport/ring.hpp"

namespace cohort::transport {

allreduce_algorithm allreduce_algorithm_for(std::int64_t bytes, int ranks) {
  if (ranks <= 1 || !std::has_single_bit(static_cast<unsigned>(ranks))) return allreduce_algorithm::ring;
  if (bytes <= (ranks == 2 ? recursive_doubling_max_bytes_pair : recursive_doubling_max_bytes))
    return allreduce_algorithm::recursive_doubling;
  return allreduce_algorithm::ring;
}

status allreduce_recursive_doubling(channel& ch, const std::vector<int>& group, tensor& buf,
                                    const collective_options& o) {
  auto p = detail::locate(ch, group, "allreduce");
  if (!p) return p.error();
  if (!buf.is_contiguous() || buf.type() != dtype::f32)
    return make_error(errc::invalid_argument, "allreduce: needs a contiguous f32 tensor");
  if (!std::has_single_bit(static_cast<unsigned>(p->size)))
    return make_error(errc::invalid_argument, "allreduce (recursive doubling): a group of " + std::to_string(p->size) +
                                                  " ranks; needs a power of two");
  tensor flat = buf.reshape({buf.numel()});
  const range all{0, flat.numel()};
  int step = 0;
  for (int bit = 1; bit < p->size; bit <<= 1, ++step) {
    const int partner = group[static_cast<std::size_t>(p->index ^ bit)];
    const detail::reduce_landing scratch(ch, partner);
    auto st = detail::exchange_step(
        ch, partner, partner, flat, all, all, o, "allreduce (recursive doubling)", step, scratch,
        [&](range r, const tensor& got) { o.reduce(flat.data<float>() + r.begin, got.data<float>(), r.size()); },
        detail::send_whole_first(ch, partner, all));
    if (!st) return st;
  }
  return {};
}

status allreduce(channel& ch, const std::vector<int>& group, tensor& buf, const collective_options& o) {
  const auto bytes = buf.numel() * static_cast<std::int64_t>(size_of(buf.type()));
  if (allreduce_algorithm_for(bytes, static_cast<int>(group.size())) == allreduce_algorithm::recursive_doubling)
    return allreduce_recursive_doubling(ch, group, buf, o);
  return allreduce_ring(ch, group, buf, o);
}

}  // namespace cohort::transport
