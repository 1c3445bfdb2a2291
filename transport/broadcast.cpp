// Broadcast (root sends to each rank), barrier (a token twice around the ring), and the
// all-gather of differently shaped pieces (each rank's piece passed around the ring).
#include "transport/collectives.hpp"
#include "transport/ring.hpp"

namespace cohort::transport {

status broadcast(channel& ch, const std::vector<int>& group, int root, tensor& buf, const collective_options& o) {
  auto p = detail::locate(ch, group, "broadcast");
  if (!p) return p.error();
  if (ch.rank() == root) {
    for (int peer : group) {
      if (peer == root) continue;
      if (auto st = ch.send(peer, o.tag, buf.clone(), o.timeout); !st)
        return detail::in_step(st.error(), "broadcast", 0, root, peer);
    }
    return {};
  }
  auto got = ch.recv(root, o.tag, o.timeout);
  if (!got) return detail::in_step(got.error(), "broadcast", 0, ch.rank(), root);
  if (got->shape() != buf.shape() || got->type() != buf.type())
    return make_error(errc::invalid_argument,
                      "broadcast: root sent " + got->shape().to_string() + ", buffer is " + buf.shape().to_string());
  buf.copy_from(*got);
  return {};
}

status barrier(channel& ch, const std::vector<int>& group, const collective_options& o) {
  auto p = detail::locate(ch, group, "barrier");
  if (!p) return p.error();
  if (p->size == 1) return {};
  // Round 1 proves everyone arrived (the token reaches the first rank back only after all
  // forwarded it); round 2 tells everyone so.
  for (int round = 0; round < 2; ++round) {
    if (p->index == 0) {
      if (auto st = ch.send(p->next, o.tag, tensor::zeros({1}), o.timeout); !st)
        return detail::in_step(st.error(), "barrier", round, ch.rank(), p->next);
      auto got = ch.recv(p->prev, o.tag, o.timeout);
      if (!got) return detail::in_step(got.error(), "barrier", round, ch.rank(), p->prev);
    } else {
      auto got = ch.recv(p->prev, o.tag, o.timeout);
      if (!got) return detail::in_step(got.error(), "barrier", round, ch.rank(), p->prev);
      if (auto st = ch.send(p->next, o.tag, std::move(*got), o.timeout); !st)
        return detail::in_step(st.error(), "barrier", round, ch.rank(), p->next);
    }
  }
  return {};
}

result<std::vector<tensor>> all_gather_pieces(channel& ch, const std::vector<int>& group, const tensor& mine,
                                              const collective_options& o) {
  auto p = detail::locate(ch, group, "all_gather_pieces");
  if (!p) return p.error();
  std::vector<tensor> pieces(static_cast<std::size_t>(p->size));
  pieces[static_cast<std::size_t>(p->index)] = mine.contiguous(true);
  for (int s = 0; s < p->size - 1; ++s) {
    int send_index = ((p->index - s) % p->size + p->size) % p->size;
    int recv_index = ((p->index - s - 1) % p->size + p->size) % p->size;
    // pieces are never written after they arrive, so passing the same storage on is safe
    if (auto st = ch.send(p->next, o.tag, pieces[static_cast<std::size_t>(send_index)], o.timeout); !st)
      return detail::in_step(st.error(), "all_gather_pieces", s, ch.rank(), p->next);
    auto got = ch.recv(p->prev, o.tag, o.timeout);
    if (!got) return detail::in_step(got.error(), "all_gather_pieces", s, ch.rank(), p->prev);
    pieces[static_cast<std::size_t>(recv_index)] = std::move(*got);
  }
  return pieces;
}

}  // namespace cohort::transport
