// Collectives with N ranks as N threads over the in-process channel: every collective for
// N in {1, 2, 3, 4, 7} (and 8 for recursive doubling), sizes from 1 element to several MiB, exact rank-derived values
// (small integers, so every float sum is exact), plus timeouts and closed channels.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <future>

#include "graph/placement.hpp"
#include "support/spawn_ranks.hpp"
#include "transport/collectives.hpp"
#include "transport/in_process.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace std::chrono_literals;
using cohort::test::spawn_ranks;

namespace {

const int rank_counts[] = {1, 2, 3, 4, 7};
const std::int64_t sizes[] = {1, 2, 3, 5, 64, 1001, (1 << 20) + 3};  // last: 4 MiB + 12 bytes

// Rank r's value at index j: exact in float, distinct per rank and index.
float value(int r, std::int64_t j) { return static_cast<float>((r + 1) * (j % 13 + 1)); }
float sum_over_ranks(int n, std::int64_t j) { return static_cast<float>(n * (n + 1) / 2 * (j % 13 + 1)); }

tensor filled(int r, std::int64_t n) {
  tensor t = tensor::empty({n});
  for (std::int64_t j = 0; j < n; ++j) t.data<float>()[j] = value(r, j);
  return t;
}

std::vector<int> all_ranks(int n) {
  std::vector<int> g;
  for (int r = 0; r < n; ++r) g.push_back(r);
  return g;
}

status expect(bool ok, const std::string& what) {
  return ok ? status{} : status(make_error(errc::invalid_argument, what));
}

void require_all_ok(const std::vector<status>& results) {
  for (std::size_t r = 0; r < results.size(); ++r) {
    CAPTURE(r);
    CHECK_MESSAGE(results[r].ok(), (results[r].ok() ? "" : results[r].error().message));
  }
}

}  // namespace

TEST_CASE("ring allreduce sums exactly for every rank count and size") {
  for (int n : rank_counts)
    for (std::int64_t size : sizes) {
      CAPTURE(n);
      CAPTURE(size);
      in_process_fabric fabric(n);
      require_all_ok(spawn_ranks(n, [&](int r) -> status {
        tensor buf = filled(r, size);
        if (auto st = allreduce_ring(fabric.endpoint(r), all_ranks(n), buf, {.tag = 1}); !st) return st;
        for (std::int64_t j = 0; j < size; ++j)
          if (buf.data<float>()[j] != sum_over_ranks(n, j))
            return expect(false, "mismatch at index " + std::to_string(j));
        return {};
      }));
    }
}

TEST_CASE("allreduce picks recursive doubling for small buffers on power-of-two groups, the ring otherwise") {
  CHECK(allreduce_algorithm_for(4, 1) == allreduce_algorithm::ring);
  CHECK(allreduce_algorithm_for(recursive_doubling_max_bytes_pair, 2) == allreduce_algorithm::recursive_doubling);
  CHECK(allreduce_algorithm_for(recursive_doubling_max_bytes_pair + 4, 2) == allreduce_algorithm::ring);
  CHECK(allreduce_algorithm_for(recursive_doubling_max_bytes, 4) == allreduce_algorithm::recursive_doubling);
  CHECK(allreduce_algorithm_for(recursive_doubling_max_bytes + 4, 4) == allreduce_algorithm::ring);
  CHECK(allreduce_algorithm_for(4, 8) == allreduce_algorithm::recursive_doubling);
  CHECK(allreduce_algorithm_for(4, 3) == allreduce_algorithm::ring);
  CHECK(allreduce_algorithm_for(4, 6) == allreduce_algorithm::ring);
}

TEST_CASE("allreduce and recursive doubling sum exactly for every rank count and size") {
  for (int n : {1, 2, 3, 4, 7, 8})
    for (std::int64_t size : sizes) {
      CAPTURE(n);
      CAPTURE(size);
      in_process_fabric fabric(n);
      require_all_ok(spawn_ranks(n, [&](int r) -> status {
        tensor a = filled(r, size), b = filled(r, size);
        if (auto st = allreduce(fabric.endpoint(r), all_ranks(n), a, {.tag = 1}); !st) return st;
        if ((n & (n - 1)) == 0)
          if (auto st = allreduce_recursive_doubling(fabric.endpoint(r), all_ranks(n), b, {.tag = 2}); !st) return st;
        for (std::int64_t j = 0; j < size; ++j) {
          if (a.data<float>()[j] != sum_over_ranks(n, j))
            return expect(false, "allreduce: mismatch at " + std::to_string(j));
          if ((n & (n - 1)) == 0 && b.data<float>()[j] != sum_over_ranks(n, j))
            return expect(false, "recursive doubling: mismatch at " + std::to_string(j));
        }
        return {};
      }));
    }
}

TEST_CASE("recursive doubling leaves identical bits on every rank when the sums round") {
  // Values whose sums round differently in different orders: every rank must still agree.
  const int n = 8;
  const std::int64_t size = 4099;
  in_process_fabric fabric(n);
  std::vector<tensor> out(n);
  require_all_ok(spawn_ranks(n, [&](int r) -> status {
    tensor buf = tensor::empty({size});
    for (std::int64_t j = 0; j < size; ++j)
      buf.data<float>()[j] = 1.0f / static_cast<float>(3 + r * 7 + j % 11) * (r % 2 ? 1e4f : 1e-3f);
    if (auto st = allreduce_recursive_doubling(fabric.endpoint(r), all_ranks(n), buf, {.tag = 3}); !st) return st;
    out[static_cast<std::size_t>(r)] = buf;
    return {};
  }));
  for (int r = 1; r < n; ++r)
    CHECK(std::memcmp(out[0].data<float>(), out[static_cast<std::size_t>(r)].data<float>(), size * sizeof(float)) == 0);
}

TEST_CASE("recursive doubling refuses a group whose size is not a power of two") {
  in_process_fabric fabric(3);
  tensor buf = filled(0, 10);
  auto st = allreduce_recursive_doubling(fabric.endpoint(0), all_ranks(3), buf, {.tag = 4});
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("power of two") != std::string::npos);
}

TEST_CASE("ring reduce-scatter leaves each rank its near-equal piece of the sum") {
  for (int n : rank_counts)
    for (std::int64_t size : sizes) {
      CAPTURE(n);
      CAPTURE(size);
      in_process_fabric fabric(n);
      require_all_ok(spawn_ranks(n, [&](int r) -> status {
        range mine = shard_range(size, n, r);
        tensor out = tensor::empty({mine.size()});
        if (auto st = reduce_scatter_ring(fabric.endpoint(r), all_ranks(n), filled(r, size), out, {.tag = 2}); !st)
          return st;
        for (std::int64_t j = 0; j < mine.size(); ++j)
          if (out.data<float>()[j] != sum_over_ranks(n, mine.begin + j))
            return expect(false, "mismatch at " + std::to_string(j));
        // the same, reducing in the input itself (a step's gradients), into a fresh output
        tensor consumed = filled(r, size), again = tensor::full({mine.size()}, -1.0f);
        if (auto st = reduce_scatter_ring_consuming(fabric.endpoint(r), all_ranks(n), consumed, again, {.tag = 5}); !st)
          return st;
        for (std::int64_t j = 0; j < mine.size(); ++j)
          if (again.data<float>()[j] != out.data<float>()[j])
            return expect(false, "consuming: mismatch at " + std::to_string(j));
        return {};
      }));
    }
}

TEST_CASE("ring all-gather assembles every rank's piece") {
  for (int n : rank_counts)
    for (std::int64_t size : sizes) {
      CAPTURE(n);
      CAPTURE(size);
      in_process_fabric fabric(n);
      require_all_ok(spawn_ranks(n, [&](int r) -> status {
        range mine = shard_range(size, n, r);
        tensor piece = tensor::empty({mine.size()});
        for (std::int64_t j = 0; j < mine.size(); ++j) piece.data<float>()[j] = value(r, mine.begin + j);
        tensor out = tensor::zeros({size});
        if (auto st = all_gather_ring(fabric.endpoint(r), all_ranks(n), piece, out, {.tag = 3}); !st) return st;
        // and with the piece already in its place in the output (the view is passed, nothing copied)
        tensor in_place = tensor::zeros({size});
        if (mine.size() > 0) in_place.slice(0, mine.begin, mine.end).copy_from(piece);
        const tensor view = in_place.slice(0, mine.begin, mine.end);
        if (auto st = all_gather_ring(fabric.endpoint(r), all_ranks(n), view, in_place, {.tag = 6}); !st) return st;
        for (int owner = 0; owner < n; ++owner) {
          range rr = shard_range(size, n, owner);
          for (std::int64_t j = rr.begin; j < rr.end; ++j) {
            if (out.data<float>()[j] != value(owner, j)) return expect(false, "mismatch at " + std::to_string(j));
            if (in_place.data<float>()[j] != value(owner, j))
              return expect(false, "in place: mismatch at " + std::to_string(j));
          }
        }
        return {};
      }));
    }
}

TEST_CASE("all-gather of differently shaped pieces returns them in group order") {
  for (int n : rank_counts) {
    CAPTURE(n);
    in_process_fabric fabric(n);
    require_all_ok(spawn_ranks(n, [&](int r) -> status {
      auto pieces = all_gather_pieces(fabric.endpoint(r), all_ranks(n), filled(r, r + 1), {.tag = 4});
      if (!pieces) return pieces.error();
      for (int owner = 0; owner < n; ++owner) {
        const tensor& p = (*pieces)[static_cast<std::size_t>(owner)];
        if (p.numel() != owner + 1 || p.at(owner) != value(owner, owner))
          return expect(false, "bad piece " + std::to_string(owner));
      }
      return {};
    }));
  }
}

TEST_CASE("broadcast copies the root's buffer to every rank, from any root") {
  for (int n : rank_counts)
    for (int root = 0; root < n; root += 2) {
      CAPTURE(n);
      CAPTURE(root);
      in_process_fabric fabric(n);
      require_all_ok(spawn_ranks(n, [&](int r) -> status {
        tensor buf = filled(r, 1001);
        if (auto st = broadcast(fabric.endpoint(r), all_ranks(n), root, buf, {.tag = 5}); !st) return st;
        for (std::int64_t j = 0; j < 1001; ++j)
          if (buf.data<float>()[j] != value(root, j)) return expect(false, "mismatch");
        return {};
      }));
    }
}

TEST_CASE("collectives on subgroups run side by side with their own tags") {
  // 4 ranks as a 2x2 mesh: allreduce over rows {0,1},{2,3} and columns {0,2},{1,3}.
  in_process_fabric fabric(4);
  require_all_ok(spawn_ranks(4, [&](int r) -> status {
    std::vector<int> row = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    std::vector<int> col = r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
    tensor a = tensor::full({10}, static_cast<float>(r));
    tensor b = tensor::full({10}, static_cast<float>(10 * r));
    if (auto st = allreduce_ring(fabric.endpoint(r), row, a, {.tag = 10}); !st) return st;
    if (auto st = allreduce_ring(fabric.endpoint(r), col, b, {.tag = 11}); !st) return st;
    float row_sum = static_cast<float>(row[0] + row[1]), col_sum = static_cast<float>(10 * (col[0] + col[1]));
    return expect(a.at(9) == row_sum && b.at(0) == col_sum, "subgroup sums");
  }));
}

TEST_CASE("the reduction is the caller's callback") {
  in_process_fabric fabric(3);
  auto max_fn = [](float* acc, const float* in, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) acc[i] = acc[i] > in[i] ? acc[i] : in[i];
  };
  require_all_ok(spawn_ranks(3, [&](int r) -> status {
    tensor buf = filled(r, 100);
    if (auto st = allreduce_ring(fabric.endpoint(r), all_ranks(3), buf, {.tag = 6, .reduce = max_fn}); !st) return st;
    return expect(buf.at(5) == value(2, 5), "max");
  }));
}

TEST_CASE("barrier returns on every rank once all arrived") {
  for (int n : rank_counts) {
    in_process_fabric fabric(n);
    std::atomic<int> arrived{0};
    require_all_ok(spawn_ranks(n, [&](int r) -> status {
      arrived.fetch_add(1);
      if (auto st = barrier(fabric.endpoint(r), all_ranks(n), {.tag = 7}); !st) return st;
      return expect(arrived.load() == n, "left the barrier early");
    }));
  }
}

TEST_CASE("a missing rank is a timeout error naming the peer, not a hang") {
  in_process_fabric fabric(3);
  auto results = spawn_ranks(3, [&](int r) -> status {
    if (r == 2) return {};  // never joins
    tensor buf = filled(r, 10);
    return allreduce_ring(fabric.endpoint(r), all_ranks(3), buf, {.tag = 8, .timeout = 200ms});
  });
  REQUIRE_FALSE(results[0].ok());
  CHECK(results[0].error().code == errc::timeout);
  CHECK(results[0].error().message.find("waited 200 ms for rank 2") != std::string::npos);
  REQUIRE_FALSE(results[1].ok());
  CHECK(results[1].error().code == errc::timeout);
}

TEST_CASE("closing the fabric wakes a waiting receiver with errc::closed") {
  in_process_fabric fabric(2);
  std::promise<void> receiving;
  auto results = spawn_ranks(2, [&](int r) -> status {
    if (r == 1) {
      receiving.get_future().wait();  // rank 0 is (about to be) waiting: either way it must wake closed
      fabric.close();
      return {};
    }
    receiving.set_value();
    auto got = fabric.endpoint(0).recv(1, 9, 10s);
    return got ? status{} : status(got.error());
  });
  REQUIRE_FALSE(results[0].ok());
  CHECK(results[0].error().code == errc::closed);
}
