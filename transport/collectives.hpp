// Collectives over a channel, among a group of ranks: allreduce (ring or recursive doubling,
// picked by size), ring reduce-scatter, ring all-gather, broadcast and barrier. The reduction arrives as a callback, so transport/
// does not depend on the kernels; every wait has the options' timeout, and a timeout or a
// closed channel comes back as an error value naming the step and the peer.
//
// Every rank of `group` must call the same collectives in the same order with the same tag
// and equal-sized buffers (group order = ring order). Pieces are the near-equal parts of the
// flat buffer given by shard_range(numel, group size, i).
//
//   in_process_fabric fabric(4);
//   collective_options opt{.tag = 42, .reduce = sum_floats, .timeout = 30s};
//   std::vector<std::thread> ranks;
//   for (int rank = 0; rank < 4; ++rank)        // each rank on its own thread
//     ranks.emplace_back([&, rank] {
//       tensor grads = tensor::full({1000}, 1.f);                                 // contiguous f32
//       status st = allreduce(fabric.endpoint(rank), {0, 1, 2, 3}, grads, opt);   // then 4 everywhere
//       assert(st.ok() && grads.at(999) == 4.f);
//     });
//   for (auto& t : ranks) t.join();
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "graph/error.hpp"
#include "graph/tensor.hpp"
#include "transport/channel.hpp"

namespace cohort::transport {

/// acc[i] = acc[i] (+) in[i] for i < n.
using reduce_fn = void (*)(float* acc, const float* in, std::int64_t n);

/// The plain sum, for callers and tests that need no other reduction.
void sum_floats(float* acc, const float* in, std::int64_t n);

struct collective_options {
  std::uint64_t tag = 0;
  reduce_fn reduce = sum_floats;
  milliseconds timeout{30000};
};

/// How allreduce() reduces: recursive doubling (log2 n steps, each exchanging the whole buffer
/// with one partner) on power-of-two groups while latency dominates: up to 1 MiB on a pair,
/// 64 KiB on larger groups (where each step moves the whole buffer again); the ring (2(n-1)
/// steps of a 1/n piece, half the reduction work on a pair) otherwise. The cost model
/// (planner/cost_model) prices the same rule.
enum class allreduce_algorithm { ring, recursive_doubling };
constexpr std::int64_t recursive_doubling_max_bytes_pair = std::int64_t{1} << 20;
constexpr std::int64_t recursive_doubling_max_bytes = std::int64_t{64} << 10;
allreduce_algorithm allreduce_algorithm_for(std::int64_t bytes, int ranks);

/// buf = the reduction of every rank's buf; every rank ends with the same bits (the reduction
/// must be commutative, as sums and maxima are). Picks the algorithm by allreduce_algorithm_for.
status allreduce(channel& ch, const std::vector<int>& group, tensor& buf, const collective_options& o);

/// The two algorithms, for tests and benchmarks; recursive doubling needs a power-of-two group.
status allreduce_recursive_doubling(channel& ch, const std::vector<int>& group, tensor& buf,
                                    const collective_options& o);
status allreduce_ring(channel& ch, const std::vector<int>& group, tensor& buf, const collective_options& o);

/// out = this rank's piece of the reduction of every rank's `in` (out has the piece's size).
status reduce_scatter_ring(channel& ch, const std::vector<int>& group, const tensor& in, tensor& out,
                           const collective_options& o);

/// As reduce_scatter_ring, reducing in `buf` itself (no copy of it): afterwards `buf` holds
/// partial sums and is to be discarded (a step's gradients, zeroed before the next).
status reduce_scatter_ring_consuming(channel& ch, const std::vector<int>& group, tensor& buf, tensor& out,
                                     const collective_options& o);

/// out (full size) = every rank's piece placed at its offset; `mine` is this rank's piece
/// (it may be the view of its place in `out`: nothing is copied then).
status all_gather_ring(channel& ch, const std::vector<int>& group, const tensor& mine, tensor& out,
                       const collective_options& o);

/// Each rank's tensor, in group order; pieces may differ in shape (uneven shards).
result<std::vector<tensor>> all_gather_pieces(channel& ch, const std::vector<int>& group, const tensor& mine,
                                              const collective_options& o);

/// buf on every rank = buf on `root` (a rank of `group`).
status broadcast(channel& ch, const std::vector<int>& group, int root, tensor& buf, const collective_options& o);

/// Returns once every rank of the group has entered the barrier.
status barrier(channel& ch, const std::vector<int>& group, const collective_options& o);

}  // namespace cohort::transport
