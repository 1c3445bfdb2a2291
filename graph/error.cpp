// Names of the error codes, for messages and logs.
#include "graph/error.hpp"

namespace cohort {

const char* to_string(errc code) {
  switch (code) {
    case errc::shape_mismatch:
      return "shape_mismatch";
    case errc::dtype_mismatch:
      return "dtype_mismatch";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::not_found:
      return "not_found";
    case errc::io_error:
      return "io_error";
    case errc::unsupported:
      return "unsupported";
    case errc::timeout:
      return "timeout";
    case errc::closed:
      return "closed";
  }
  return "unknown";
}

}  // namespace cohort
