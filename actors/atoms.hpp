// The atoms that name the runtime's messages (actors/messages.hpp says what each means;
// actors/protocol.hpp which actor answers which).
//
//   caf::message m = caf::make_message(step_atom::value, std::int64_t{0}, std::int64_t{5}, std::int64_t{4});
//   assert(m.match_element<step_atom>(0));
#pragma once

#include <caf/all.hpp>

namespace cohort::actors {

using step_atom = caf::atom_constant<caf::atom("step")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using batch_atom = caf::atom_constant<caf::atom("batch")>;
using prepare_atom = caf::atom_constant<caf::atom("prepare")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using attach_atom = caf::atom_constant<caf::atom("attach")>;
using rollback_atom = caf::atom_constant<caf::atom("rollback")>;
using reset_atom = caf::atom_constant<caf::atom("reset")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using ok_atom = caf::atom_constant<caf::atom("ok")>;
using export_atom = caf::atom_constant<caf::atom("export")>;
using plan_atom = caf::atom_constant<caf::atom("plan")>;
using transfer_atom = caf::atom_constant<caf::atom("transfer")>;
using replan_atom = caf::atom_constant<caf::atom("replan")>;
using scale_atom = caf::atom_constant<caf::atom("scale")>;
using call_atom = caf::atom_constant<caf::atom("call")>;
using observe_atom = caf::atom_constant<caf::atom("observe")>;
using refit_atom = caf::atom_constant<caf::atom("refit")>;
using configure_atom = caf::atom_constant<caf::atom("configure")>;

}  // namespace cohort::actors
