// The actor system a run trains in, configured the one way every run (apps, calibration,
// tests) wants it: at most `threads` scheduler threads and the sharing policy — workers
// compute on their own threads, the scheduler only runs the light coordinator, planner,
// data and parameter actors, and work stealing's polling would take cores from the
// workers while the sharing policy sleeps when idle. CAF's own options
// (--scheduler.*, --logger.*) given by the user come last and win.
//
//   auto cfg = system_config(/*threads=*/2, {"--scheduler.max-threads=4"});
//   if (!cfg) return cfg.error();                       // a malformed CAF option, named
//   caf::actor_system sys{**cfg};
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <string>
#include <vector>

#include "graph/error.hpp"

namespace cohort::actors {

result<std::unique_ptr<caf::actor_system_config>> system_config(int threads,
                                                                const std::vector<std::string>& caf_arguments);

}  // namespace cohort::actors
