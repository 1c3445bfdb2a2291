// What the control-plane tests share: a coordinator started on its own thread, a node joining
// as a given process, the refusal a failed join names, and every plane finished at once.
//
//   job_ports ports(3);
//   coordinator c(ports, job_options(ports, 2));
//   auto node = join_as(job_options(ports, 2), 1, ports.data[1].port());
//   finish_all({&c.get(), node->get()});
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "process_job.hpp"
#include "transport/control_plane.hpp"

namespace cohort::test {

using namespace cohort::transport;
using namespace std::chrono_literals;

using plane_result = result<std::unique_ptr<control_plane>>;

inline control_options job_options(job_ports& ports, int world) {
  control_options o;
  o.world = world;
  o.master_port = ports.control.port();
  o.join_timeout = 20s;
  return o;
}

// The coordinator of a job of `o.world`, on its own thread; get() waits for the job to form.
struct coordinator {
  plane_result cp = make_error(errc::closed, "not run");
  std::thread thread;
  coordinator(job_ports& ports, const control_options& o) {
    thread = std::thread(
        [this, &ports, o] { cp = control_plane::coordinate(o, std::move(ports.control), ports.data[0].port()); });
  }
  ~coordinator() {
    if (thread.joinable()) thread.join();
  }
  control_plane& get() {
    thread.join();
    REQUIRE_MESSAGE(cp.ok(), (cp.ok() ? "" : cp.error().message));
    return **cp;
  }
};

inline plane_result join_as(control_options o, int process, int data_port) {
  o.process = process;
  return control_plane::join(o, data_port);
}

inline std::string refusal(const plane_result& r) { return r.ok() ? "joined" : r.error().message; }

// Counts finished threads; wait_for returns once `n` have (false after the timeout).
struct finished {
  std::mutex mutex;
  std::condition_variable cv;
  int count = 0;
  void one() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++count;
    }
    cv.notify_all();
  }
  bool wait_for(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, timeout, [&] { return count >= n; });
  }
};

// Every process's orderly goodbye at once (each waits for the others').
inline void finish_all(const std::vector<control_plane*>& planes) {
  std::vector<status> results(planes.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < planes.size(); ++i) threads.emplace_back([&, i] { results[i] = planes[i]->finish(10s); });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < planes.size(); ++i) {
    CAPTURE(i);
    CHECK_MESSAGE(results[i].ok(), (results[i].ok() ? "" : results[i].error().message));
  }
}

}  // namespace cohort::test
