// The near-equal split of a global batch.
#include "planner/batch_split.hpp"

namespace cohort::planner {

std::int64_t batch_split::replica_rows(int replica) const {
  std::int64_t total = 0;
  for (int mb = 0; mb < micro_batches; ++mb) total += rows(replica, mb);
  return total;
}

std::int64_t batch_split::first(int replica, int mb) const {
  std::int64_t at = 0;
  for (int d = 0; d < replica; ++d) at += replica_rows(d);
  return at + first_in_replica(replica, mb);
}

std::int64_t batch_split::first_in_replica(int replica, int mb) const {
  std::int64_t at = 0;
  for (int j = 0; j < mb; ++j) at += rows(replica, j);
  return at;
}

bool batch_split::uses(int replica, std::int64_t n) const {
  for (int mb = 0; mb < micro_batches; ++mb)
    if (rows(replica, mb) == n) return true;
  return false;
}

}  // namespace cohort::planner
