// The control proxy: a detached actor (its own thread) that runs the coordinator's blocking
// work — control-plane collectives across processes (the job's loss, the parameters' gather,
// the new plan's broadcast), connecting a new data plane, a transition's state exchange — so
// that no coordinator handler ever blocks a scheduler thread. Each call is a request with a
// timeout; the call's own waits have theirs.
//
//   // An actor that sums each step's loss across processes and never blocks a scheduler thread:
//   caf::behavior loss_reporter(caf::event_based_actor* self, std::function<result<double>(double)> sum_over_processes) {
//     auto proxy = self->spawn<caf::detached>(control_proxy);   // its own thread
//     return {
//         [=](std::int64_t step, double local) {
//           auto total = std::make_shared<result<double>>(make_error(errc::closed, "not run"));
//           self->request(proxy, 60s, call_atom::value, blocking_call{[=] { *total = sum_over_processes(local); }})
//               .then([=](ok_atom) { if (*total) std::printf("step %lld: %f\n", static_cast<long long>(step), **total); },
//                     [=](caf::error& e) { std::printf("control proxy: %s\n", to_string(e).c_str()); });
//         },
//     };
//   }
#pragma once

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace cohort::actors {

control_proxy_hdl::behavior_type control_proxy();

}  // namespace cohort::actors
