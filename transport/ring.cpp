// Ring bookkeeping shared by the ring collectives.
#include "transport/ring.hpp"

#include <algorithm>
#include <cstring>

namespace cohort::transport::detail {

result<ring_position> locate(const channel& ch, const std::vector<int>& group, const char* what) {
  auto it = std::find(group.begin(), group.end(), ch.rank());
  if (it == group.end())
    return make_error(errc::invalid_argument,
                      std::string(what) + ": rank " + std::to_string(ch.rank()) + " is not in its group");
  ring_position p;
  p.index = static_cast<int>(it - group.begin());
  p.size = static_cast<int>(group.size());
  p.next = group[static_cast<std::size_t>((p.index + 1) % p.size)];
  p.prev = group[static_cast<std::size_t>((p.index + p.size - 1) % p.size)];
  return p;
}

tensor copy_range(const tensor& flat, range r) {
  tensor out = tensor::empty({r.size()}, flat.type());
  if (r.size() > 0)
    std::memcpy(out.data<std::byte>(),
                flat.data<std::byte>() + r.begin * static_cast<std::int64_t>(size_of(flat.type())),
                static_cast<std::size_t>(r.size()) * size_of(flat.type()));
  return out;
}

tensor piece_to_send(const channel& ch, int peer, const tensor& work, range r) {
  if (!ch.send_copies(peer)) return copy_range(work, r);
  return tensor(work.storage_ptr(), shape{r.size()}, work.type(), work.offset() + r.begin);
}

tensor reduce_landing::operator()(range r) const {
  if (!remote_ || r.size() > exchange_chunk_elems) return tensor();
  thread_local tensor scratch = tensor::empty({exchange_chunk_elems});
  return tensor(scratch.storage_ptr(), shape{r.size()}, dtype::f32, 0);
}

error in_step(const error& e, const char* what, int step, int me, int peer) {
  return make_error(e.code, std::string(what) + " step " + std::to_string(step) + " (rank " + std::to_string(me) +
                                " <- " + std::to_string(peer) + "): " + e.message);
}

}  // namespace cohort::transport::detail
