// The control proxy's one handler.
#include "actors/control_proxy.hpp"

namespace cohort::actors {

control_proxy_hdl::behavior_type control_proxy() {
  return {
      [](call_atom, blocking_call& c) -> caf::result<ok_atom> {
        if (c.run) c.run();
        return ok_atom::value;
      },
  };
}

}  // namespace cohort::actors
