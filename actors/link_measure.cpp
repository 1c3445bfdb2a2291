// Link measurements for the cost model: see link_measure.hpp.
#include "actors/link_measure.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "transport/collectives.hpp"
#include "transport/socket.hpp"
#include "transport/tcp_fabric.hpp"
#include "transport/ucx_fabric.hpp"

namespace cohort::actors {
namespace {

using clock_type = std::chrono::steady_clock;

// Both ranks allreduce `floats` floats `repeats` times (after one untimed warm-up); the
// fastest allreduce's seconds, the slower rank's. A disturbance only ever makes one slower.
double allreduce_seconds(transport::channel& a, transport::channel& b, std::int64_t floats, int repeats,
                         std::uint64_t first_tag) {
  std::vector<double> per(2, 0.0);
  auto run = [&](transport::channel& ch, int rank) {
    tensor buf = tensor::full({floats}, 1.0f);
    transport::collective_options o;
    o.timeout = std::chrono::milliseconds(10000);
    std::vector<double> times;
    for (int i = 0; i < repeats + 1; ++i) {
      o.tag = first_tag + static_cast<std::uint64_t>(i);
      auto t0 = clock_type::now();
      (void)transport::allreduce_recursive_doubling(ch, {0, 1}, buf, o);
      if (i > 0) times.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    per[static_cast<std::size_t>(rank)] = *std::min_element(times.begin(), times.end());
  };
  std::thread other([&] { run(b, 1); });
  run(a, 0);
  other.join();
  return std::max(per[0], per[1]);
}

// Two data planes of one kind, as processes 0 and 1 of a job with one rank each.
struct plane_pair {
  std::shared_ptr<transport::fabric> first, second;
};

result<plane_pair> connect_tcp() {
  auto l0 = transport::tcp_listener::open("127.0.0.1", 0);
  if (!l0) return l0.error();
  auto l1 = transport::tcp_listener::open("127.0.0.1", 0);
  if (!l1) return l1.error();
  transport::tcp_fabric_options o;
  o.process_of_rank = {0, 1};
  o.peers = {{"127.0.0.1", l0->port()}, {"127.0.0.1", l1->port()}};
  o.timeout = std::chrono::milliseconds(10000);
  transport::tcp_fabric_options o1 = o;
  o1.process = 1;
  // process 1 accepts process 0's connection while process 0 connects
  auto accepting = std::async(std::launch::async, [&] { return transport::tcp_fabric::connect(*l1, o1); });
  auto f0 = transport::tcp_fabric::connect(*l0, o);
  auto f1 = accepting.get();
  if (!f0) return f0.error();
  if (!f1) return f1.error();
  return plane_pair{*f0, *f1};
}

result<plane_pair> connect_ucx() {
  transport::tcp_fabric_options o;
  o.process_of_rank = {0, 1};
  o.peers = {{"127.0.0.1", 0}, {"127.0.0.1", 0}};
  o.timeout = std::chrono::milliseconds(10000);
  transport::tcp_fabric_options o1 = o;
  o1.process = 1;
  auto f0 = transport::ucx_fabric::create(o);
  if (!f0) return f0.error();
  auto f1 = transport::ucx_fabric::create(o1);
  if (!f1) return f1.error();
  const std::vector<std::string> addresses = {(*f0)->address(), (*f1)->address()};
  if (auto st = (*f0)->connect(addresses); !st) return st.error();
  if (auto st = (*f1)->connect(addresses); !st) return st.error();
  return plane_pair{*f0, *f1};
}

}  // namespace

planner::link_cost measure_link(transport::channel& a, transport::channel& b) {
  const std::int64_t small = 1024, large = 1 << 20;  // 4 KiB, 4 MiB
  const double ts = allreduce_seconds(a, b, small, 50, 0), tl = allreduce_seconds(a, b, large, 20, 1000);
  const double per_byte = std::max(1e-13, (tl - ts) / (static_cast<double>(large - small) * 4.0));  // = 1 / beta
  // Where load slowed the large exchange more than the small one the intercept comes out at or
  // below zero: a link without latency, which no refit could scale. The small exchange's whole
  // time bounds alpha from above: taken then.
  const double alpha = ts - static_cast<double>(small) * 4.0 * per_byte;
  return {1.0 / per_byte, alpha > 0 ? alpha : ts};
}

result<planner::link_cost> measure_process_link(const std::string& plane) {
  result<plane_pair> pair = plane == "tcp" ? connect_tcp()
                            : plane == "ucx"
                                ? connect_ucx()
                                : make_error(errc::invalid_argument, "a link between processes over '" + plane +
                                                                         "': the data planes are tcp and ucx");
  if (!pair) return make_error(pair.error().code, "measuring the " + plane + " link: " + pair.error().message);
  const planner::link_cost c = measure_link(pair->first->endpoint(0), pair->second->endpoint(1));
  pair->first->close("measured");
  pair->second->close("measured");
  return c;
}

}  // namespace cohort::actors
