// The data-plane scenarios shared by the TCP and UCX tests: one process's part of each job.
#include "fabric_scenarios.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "transport/collectives.hpp"

namespace cohort::test {

using namespace std::chrono_literals;
using namespace cohort::transport;

bool job_succeeds(data_plane plane, int processes, const scenario& part) {
  bool all = true;
  for (int c : run_job(processes, [&](job_ports&j, int p) { return part(plane, j, p); })) all = all && c == 0;
  return all;
}

namespace {

// What the endpoint promises, by fabric: TCP sends up to its socket buffer (at most 1 MiB)
// ahead and starts a piece with a 32 KiB chunk; UCX keeps the channel's defaults.
status check_sizes(data_plane plane, const channel& ch, int remote, int local, int nonexistent) {
  const std::int64_t ahead = ch.send_ahead_bytes(remote);
  const bool ok = plane == data_plane::tcp
                      ? ahead > 0 && ahead <= (1 << 20) && ch.first_chunk_bytes(remote) == (32 << 10)
                      : ahead == 0 && ch.first_chunk_bytes(remote) == (256 << 10);
  if (!ok || ch.send_ahead_bytes(local) != 0 || ch.send_ahead_bytes(nonexistent) != 0)
    return expect(false, std::string(name_of(plane)) + " send_ahead_bytes: " + std::to_string(ahead) +
                             " to a remote rank, " + std::to_string(ch.send_ahead_bytes(local)) + " to a local one, " +
                             std::to_string(ch.send_ahead_bytes(nonexistent)) + " to a nonexistent one; first chunk " +
                             std::to_string(ch.first_chunk_bytes(remote)));
  return expect(ch.send_copies(remote) && !ch.send_copies(local), "send_copies: true to remote ranks only");
}

// One rank's collectives, every result checked exactly.
status rank_collectives(data_plane plane, channel& ch, int process, int processes, int per_process, int k) {
  const int ranks = processes * per_process;
  const int me = process * per_process + k;
  std::vector<int> group;
  for (int r = 0; r < ranks; ++r) group.push_back(r);
  const int remote = ((process + 1) % processes) * per_process, local = process * per_process + (k + 1) % per_process;
  if (auto st = check_sizes(plane, ch, remote, local, ranks); !st) return st;
  // 50003 floats (200 KB: within even a default 208 KiB send buffer): several chunks, sent
  // whole first by allreduce()'s recursive doubling on 2 processes; (1 << 20) + 3: chunk by chunk
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{1001}, std::int64_t{50003}, std::int64_t{(1 << 20) + 3}})
    for (bool ring : {true, false}) {  // the ring, and allreduce()'s pick (recursive doubling on pairs)
      tensor buf = tensor::empty({n});
      for (std::int64_t j = 0; j < n; ++j) buf.data<float>()[j] = value(me, j);
      auto st = ring ? allreduce_ring(ch, group, buf, {.tag = 1, .timeout = 20s})
                     : allreduce(ch, group, buf, {.tag = 3, .timeout = 20s});
      if (!st) return st;
      for (std::int64_t j = 0; j < n; ++j)
        if (buf.data<float>()[j] != static_cast<float>(ranks * (ranks + 1) / 2 * (j % 13 + 1)))
          return expect(false, std::string(ring ? "ring" : "allreduce()") + " wrong at " + std::to_string(j) + " of " +
                                   std::to_string(n));
    }
  tensor b = tensor::full({7}, me == 1 ? 3.5f : 0.f);
  if (auto st = broadcast(ch, group, 1, b, {.tag = 2, .timeout = 20s}); !st) return st;
  return expect(b.data<float>()[6] == 3.5f, "broadcast value");
}

tensor counting(float base, std::int64_t n) {
  tensor t = tensor::empty({n});
  for (std::int64_t j = 0; j < n; ++j) t.data<float>()[j] = base + static_cast<float>(j);
  return t;
}

bool is_counting(const tensor& t, float base, std::int64_t n) {
  if (t.numel() != n) return false;
  for (std::int64_t j = 0; j < n; ++j)
    if (t.data<float>()[j] != base + static_cast<float>(j)) return false;
  return true;
}

bool all_equal(const tensor& t, float v) {
  for (std::int64_t j = 0; j < t.numel(); ++j)
    if (t.data<float>()[j] != v) return false;
  return true;
}

}  // namespace

status run_collectives(data_plane plane, job_ports& ports, int process, int processes, int per_process) {
  auto cp = join_job(ports, process, processes);
  if (!cp) return cp.error();
  std::vector<int> owner;
  for (int r = 0; r < processes * per_process; ++r) owner.push_back(r / per_process);
  auto fabric = connect_data(plane, ports, **cp, owner);
  if (!fabric) return fabric.error();
  std::vector<std::thread> threads;
  std::vector<status> results(static_cast<std::size_t>(per_process));
  for (int k = 0; k < per_process; ++k)
    threads.emplace_back([&, k] {
      channel& ch = (*fabric)->endpoint(process * per_process + k);
      results[static_cast<std::size_t>(k)] = rank_collectives(plane, ch, process, processes, per_process, k);
    });
  for (auto& t : threads) t.join();
  for (auto& st : results)
    if (!st) return st;
  auto total = (*cp)->sum(7, {static_cast<double>(process) + 0.25});
  if (!total) return total.error();
  if (auto st = expect((*total)[0] == processes * (processes - 1) / 2.0 + 0.25 * processes, "control sum"); !st)
    return st;
  return (*cp)->finish(10s);
}

// Process 0 sends the whole burst, then a marker; process 1 waits for the marker first, so
// every frame of the burst has been read (frames from one process arrive in order) by
// reads that took whatever the socket held: several frames, or ones ending inside a header,
// a shape or a payload.
status run_burst(data_plane plane, job_ports& ports, int process) {
  auto job = join_pair(plane, ports, process);
  if (!job) return job.error();
  auto& [cp, fabric] = *job;
  channel& ch = fabric->endpoint(process);
  std::vector<shape> shapes = {shape{}, shape{0}, shape{1}, shape{3, 0, 2}, shape{2, 3, 5}, shape{100000}, shape{1}};
  for (std::int64_t n = 1000; n <= 1030; n += 3)
    shapes.push_back(shape{n});  // 4,000 - 4,120 bytes: frames either side of the look-ahead (4,160)
  for (std::int64_t n = 1; n <= 64; n *= 2) shapes.push_back(shape{n, 3});
  auto fill = [](const shape& s, std::uint64_t tag) {
    tensor t = tensor::empty(s);
    for (std::int64_t j = 0; j < t.numel(); ++j)
      t.data<float>()[j] = static_cast<float>(tag * 1000003 + static_cast<std::uint64_t>(j));
    return t;
  };
  const std::uint64_t marker = 9998, done = 9999;
  if (process == 0) {
    for (std::size_t i = 0; i < shapes.size(); ++i)
      if (auto st = ch.send(1, i, fill(shapes[i], i), 20s); !st) return st;
    if (auto st = ch.send(1, marker, tensor::zeros({1}), 20s); !st) return st;
    if (auto got = ch.recv(1, done, 20s); !got) return got.error();
  } else {
    if (auto got = ch.recv(0, marker, 20s); !got) return got.error();
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      tensor landing = tensor::full({shapes[i].numel()}, -1.f);
      auto got = i % 2 == 0 ? ch.recv(0, i, 20s) : ch.recv_landing(0, i, landing, 20s);
      if (!got) return got.error();
      const tensor want = fill(shapes[i], i);
      bool same = got->shape() == shapes[i];
      for (std::int64_t j = 0; same && j < want.numel(); ++j) same = got->data<float>()[j] == want.data<float>()[j];
      if (!same)
        return expect(false, "message " + std::to_string(i) + " of shape " + shapes[i].to_string() + " arrived wrong");
    }
    if (auto st = ch.send(0, done, tensor::zeros({1}), 20s); !st) return st;
  }
  return cp->finish(10s);
}

// Messages that come long after their receive began (process 0 computes 5 ms before each):
// the waiting rank has spun its budget and waits in the kernel, and each still arrives whole,
// in order; the replies travel the other way the same way.
status run_late_messages(data_plane plane, job_ports& ports, int process) {
  auto job = join_pair(plane, ports, process);
  if (!job) return job.error();
  auto& [cp, fabric] = *job;
  channel& ch = fabric->endpoint(process);
  auto busy = [] {  // computing, not sleeping: the peer's wait must outlast its spin on its own
    volatile std::uint64_t x = 1;
    const auto until = std::chrono::steady_clock::now() + 5ms;
    while (std::chrono::steady_clock::now() < until) x = x * 6364136223846793005ull + 1;
  };
  for (std::uint64_t k = 0; k < 6; ++k) {
    const std::int64_t n = 1000 * static_cast<std::int64_t>(k + 1) * static_cast<std::int64_t>(k + 1);
    if (process == 0) {
      busy();
      tensor t = tensor::empty({n});
      for (std::int64_t j = 0; j < n; ++j) t.data<float>()[j] = value(0, j + static_cast<std::int64_t>(k));
      if (auto st = ch.send(1, 100 + k, std::move(t), 20s); !st) return st;
      if (auto got = ch.recv(1, 200 + k, 20s); !got) return got.error();
    } else {
      auto got = ch.recv(0, 100 + k, 20s);
      if (!got) return got.error();
      bool same = got->numel() == n;
      for (std::int64_t j = 0; same && j < n; ++j)
        same = got->data<float>()[j] == value(0, j + static_cast<std::int64_t>(k));
      if (!same) return expect(false, "late message " + std::to_string(k) + " arrived wrong");
      busy();
      if (auto st = ch.send(0, 200 + k, tensor::zeros({1}), 20s); !st) return st;
    }
  }
  return cp->finish(10s);
}

// Process 1 offers its buffer (offer_landing) and only then tells process 0 to send: the
// payload must land in it. Message 20 is known to have come before its receive (21, sent
// after it, came first); message 31 is sent only after the wait for it timed out.
status run_landing(data_plane plane, job_ports& ports, int process) {
  auto job = join_pair(plane, ports, process);
  if (!job) return job.error();
  auto& [cp, fabric] = *job;
  channel& ch = fabric->endpoint(process);
  const std::int64_t n = 100000;
  if (process == 0) {
    if (auto go = ch.recv(1, 100, 20s); !go) return go.error();  // process 1's buffer is offered
    if (auto st = ch.send(1, 10, counting(1.f, n), 20s); !st) return st;
    if (auto st = ch.send(1, 20, counting(2.f, n), 20s); !st) return st;
    if (auto st = ch.send(1, 21, tensor::zeros({1}), 20s); !st) return st;
    if (auto go = ch.recv(1, 30, 20s); !go) return go.error();  // its wait for 31 timed out
    if (auto st = ch.send(1, 31, counting(3.f, n), 20s); !st) return st;
    return cp->finish(10s);
  }
  tensor landing = tensor::full({n}, -1.f);
  auto offered = fabric->offer_landing(1, 0, 10, landing);
  if (!offered) return offered.error();
  if (offered->has_value()) return expect(false, "message 10 came before process 0 was told to send it");
  if (auto st = ch.send(0, 100, tensor::zeros({1}), 20s); !st) return st;
  auto got = fabric->wait_landing(1, 0, 10, 20s);
  if (!got) return got.error();
  if (got->data<float>() != landing.data<float>())
    return expect(false, "the payload offered a buffer did not land in it");
  if (!is_counting(landing, 1.f, n)) return expect(false, "the landing buffer holds the wrong values");

  if (auto st = ch.recv(0, 21, 20s); !st) return st.error();  // so message 20 is here already
  tensor unused = tensor::full({n}, -1.f);
  auto early = ch.recv_landing(0, 20, unused, 20s);
  if (!early || !is_counting(*early, 2.f, n)) return expect(false, "a message that came first is wrong");
  if (early->data<float>() == unused.data<float>() || !all_equal(unused, -1.f))
    return expect(false, "a message that came before its receive was copied into the offered buffer");

  tensor untouched = tensor::full({n}, -1.f);
  auto late = ch.recv_landing(0, 31, untouched, 50ms);
  if (late || late.error().code != errc::timeout) return expect(false, "the wait for message 31 did not time out");
  if (auto st = ch.send(0, 30, tensor::zeros({1}), 20s); !st) return st;
  auto whole = ch.recv(0, 31, 20s);
  if (!whole || !is_counting(*whole, 3.f, n)) return expect(false, "the message after a timed-out wait is wrong");
  if (!all_equal(untouched, -1.f)) return expect(false, "a timed-out landing buffer was written");
  return cp->finish(10s);
}

// Process 1 closes its fabric while (or before: either way) one of its threads waits.
status run_closing(data_plane plane, job_ports& ports, int process) {
  auto job = join_pair(plane, ports, process);
  if (!job) return job.error();
  auto& [cp, fabric] = *job;
  if (process == 0) return cp->finish(20s);  // waits for process 1's goodbye
  channel& ch = fabric->endpoint(1);
  result<tensor> waited = make_error(errc::io_error, "not run");
  std::thread waiter([&] { waited = ch.recv(0, 5, 20s); });
  fabric->close("closed by the test");
  waiter.join();
  if (waited || waited.error().code != errc::closed ||
      waited.error().message.find("closed by the test") == std::string::npos)
    return expect(false, "the waiting receive: " + (waited ? std::string("a message") : waited.error().message));
  auto sent = ch.send(0, 6, tensor::zeros({1}), 20s);
  if (sent || sent.error().code != errc::closed || sent.error().message != "send: channel closed: closed by the test")
    return expect(false, "a send after close: " + (sent ? std::string("sent") : sent.error().message));
  auto again = ch.recv(0, 7, 20s);
  if (again || again.error().code != errc::closed) return expect(false, "a receive after close did not fail closed");
  if (fabric->closed_reason() != "closed by the test")
    return expect(false, "closed_reason: " + fabric->closed_reason());
  auto stranger = ch.send(2, 1, tensor::zeros({1}), 1s);
  if (stranger || stranger.error().code != errc::invalid_argument ||
      stranger.error().message != "send: rank 1 to nonexistent peer 2")
    return expect(false, "a send to rank 2 of 2 was not refused as invalid");
  try {
    (void)fabric->endpoint(0);
    return expect(false, "endpoint(0) of process 1 did not throw");
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()) != std::string(name_of(plane)) + "_fabric: rank 0 is not in this process")
      return expect(false, std::string("endpoint(0): ") + e.what());
  }
  return cp->finish(20s);
}

status run_refused_frame(data_plane plane, job_ports& ports, int process, std::vector<int> map_of_1,
                         std::uint64_t generation_of_0, const std::string& why) {
  auto job = join_pair(plane, ports, process, process == 0 ? std::vector<int>{0, 1} : std::move(map_of_1),
                       process == 0 ? generation_of_0 : 1);
  if (!job) return job.error();
  auto& [cp, fabric] = *job;
  if (process == 0) {
    if (auto st = fabric->endpoint(0).send(1, 5, tensor::full({4}, 1.f), 20s); !st) return st;
    return cp->finish(20s);  // until process 1 is done
  }
  int waiter = fabric->size() - 1;
  while (!fabric->is_local(waiter)) --waiter;
  auto r = fabric->endpoint(waiter).recv(0, 5, 20s);
  if (r) return expect(false, "a frame to refuse was delivered");
  if (r.error().code != errc::closed || r.error().message.find(why) == std::string::npos)
    return expect(false, "unexpected error: " + r.error().message);
  return cp->finish(20s);
}

status run_misrouted(data_plane plane, job_ports& ports, int process) {
  return run_refused_frame(plane, ports, process, {1, 1}, 1, "source rank 0 does not live in process 0");
}

status run_misaddressed(data_plane plane, job_ports& ports, int process) {
  return run_refused_frame(plane, ports, process, {0, 0, 1}, 1, "destination rank 1 does not live in this process");
}

}  // namespace cohort::test
