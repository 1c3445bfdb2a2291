// One control connection as the control plane keeps it (internal to transport/): the
// socket, who is at the other end, and what the monitor knows of its liveness.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "transport/control_plane.hpp"
#include "transport/socket.hpp"

namespace cohort::transport {

struct control_plane::peer {
  tcp_socket socket;
  std::mutex write;
  std::string address;
  std::int64_t pid = 0;
  std::chrono::steady_clock::time_point last_heard = std::chrono::steady_clock::now();
  bool open = true;  // monitor thread only
  std::atomic<bool> said_bye{false};
};

}  // namespace cohort::transport
