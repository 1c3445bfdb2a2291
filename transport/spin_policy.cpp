// The spin window's pause.
#include "transport/spin_policy.hpp"

#include <thread>

namespace cohort::transport {

void spin_window::pause() const {
  if (std::chrono::steady_clock::now() - start_ > free_spin) std::this_thread::yield();
}

}  // namespace cohort::transport
