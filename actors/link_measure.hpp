// Measures a link for the cost model: two ranks allreduce by recursive doubling (one exchange
// of the whole buffer) at 4 KiB and 4 MiB, the fastest of several tries each, and alpha and
// beta are solved from the two (t = alpha + bytes / beta, as planner::allreduce_recursive_
// doubling_seconds prices it; where load leaves no positive alpha, the small exchange's
// time). calibrate() measures the in-process link so; the link between two processes of a job
// on this machine is measured over two data planes of the kind the job uses, both in this
// process (their traffic goes through the kernel's loopback or UCX's shared memory exactly as
// between processes).
//
//   planner::machine_profile profile;
//   auto tcp = actors::measure_process_link("tcp");         // about 0.2 s
//   if (!tcp) return tcp.error();                            // the plane cannot start here
//   profile.process_links["tcp"].cost = *tcp;
//   transport::in_process_fabric f(2);
//   planner::link_cost here = actors::measure_link(f.endpoint(0), f.endpoint(1));
#pragma once

#include <string>

#include "graph/error.hpp"
#include "planner/machine_profile.hpp"
#include "transport/channel.hpp"

namespace cohort::actors {

/// Rank 0 at `a`, rank 1 at `b` (of one fabric or of two connected ones), driven from two threads.
planner::link_cost measure_link(transport::channel& a, transport::channel& b);

/// The link between two processes over `plane` ("tcp" or "ucx"). Errors: an unknown plane, a
/// plane that cannot start or connect here.
result<planner::link_cost> measure_process_link(const std::string& plane);

}  // namespace cohort::actors
