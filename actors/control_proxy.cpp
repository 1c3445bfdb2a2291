// The control proxy's one handler.
#include "actors/control_proxy.hpp"

namespace cohort::actors {

caf::behavior control_proxy(caf::event_based_actor* /*self*/) {
  return {
      [](call_atom, blocking_call& c) {
        if (c.run) c.run();
        return ok_atom::value;
      },
  };
}

}  // namespace cohort::actors
