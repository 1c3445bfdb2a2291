// The control proxy: a detached actor (its own thread) that runs the coordinator's blocking
// work — control-plane collectives across processes (the job's loss, the parameters' gather,
// the new plan's broadcast), connecting a new data plane, a transition's state exchange — so
// that no coordinator handler ever blocks a scheduler thread. Each call is a request with a
// timeout; the call's own waits have theirs.
//
//   auto proxy = self->spawn<caf::detached>(control_proxy);
//   auto total = std::make_shared<result<double>>(make_error(errc::closed, "not run"));
//   self->request(proxy, timeout, call_atom::value, blocking_call{[=] { *total = sum(step, local); }})
//       .then([=](ok_atom) { use(*total); }, [=](caf::error& e) { ... });
#pragma once

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace cohort::actors {

control_proxy_hdl::behavior_type control_proxy();

}  // namespace cohort::actors
