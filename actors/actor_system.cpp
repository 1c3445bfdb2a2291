// The actor system's configuration.
#include "actors/actor_system.hpp"

#include <algorithm>

namespace cohort::actors {

result<std::unique_ptr<caf::actor_system_config>> system_config(int threads,
                                                                const std::vector<std::string>& caf_arguments) {
  auto cfg = std::make_unique<caf::actor_system_config>();
  cfg->set("scheduler.max-threads", std::max(1, threads));
  cfg->set("scheduler.policy", caf::atom("sharing"));
  std::vector<std::string> args = caf_arguments;
  if (auto err = cfg->parse(args); err)
    return make_error(errc::invalid_argument, "CAF options: " + caf::to_string(err));
  return cfg;
}

}  // namespace cohort::actors
