// The near-equal split of a global batch: graph/placement's shard_range over the replicas,
// then over each replica's micro-batches.
#include "planner/batch_split.hpp"

#include "graph/placement.hpp"

namespace cohort::planner {

std::int64_t batch_split::replica_rows(int replica) const { return shard_range(batch, dp, replica).size(); }

std::int64_t batch_split::rows(int replica, int mb) const {
  return shard_range(replica_rows(replica), micro_batches, mb).size();
}

std::int64_t batch_split::first(int replica, int mb) const {
  return shard_range(batch, dp, replica).begin + first_in_replica(replica, mb);
}

std::int64_t batch_split::first_in_replica(int replica, int mb) const {
  return shard_range(replica_rows(replica), micro_batches, mb).begin;
}

// a replica's larger micro-batches come first
bool batch_split::uses(int replica, std::int64_t n) const {
  return rows(replica, 0) == n || rows(replica, micro_batches - 1) == n;
}

}  // namespace cohort::planner
