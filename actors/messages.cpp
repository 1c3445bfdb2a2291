// Errors across the CAF boundary.
#include "actors/messages.hpp"

namespace cohort::actors {

namespace {
const caf::atom_value cohort_category = caf::atom("cohort");
}  // namespace

caf::error to_caf(const error& e) {
  return caf::error(static_cast<std::uint8_t>(e.code), cohort_category, caf::make_message(e.message));
}

error from_caf(const caf::error& e) {
  if (e.category() == cohort_category && e.context().match_elements<std::string>())
    return make_error(static_cast<errc>(e.code()), e.context().get_as<std::string>(0));
  return make_error(errc::closed, to_string(e));
}

}  // namespace cohort::actors
