#include "python/src/status.h"

namespace nb = nanobind;

namespace tfdata::python {
namespace {

const char* ClassFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument: return "InvalidArgumentError";
    case absl::StatusCode::kNotFound: return "NotFoundError";
    case absl::StatusCode::kUnavailable: return "UnavailableError";
    case absl::StatusCode::kDeadlineExceeded: return "DeadlineExceededError";
    case absl::StatusCode::kFailedPrecondition: return "FailedPreconditionError";
    case absl::StatusCode::kAlreadyExists: return "AlreadyExistsError";
    case absl::StatusCode::kDataLoss: return "DataLossError";
    case absl::StatusCode::kResourceExhausted: return "ResourceExhaustedError";
    case absl::StatusCode::kOutOfRange: return "OutOfRangeError";
    case absl::StatusCode::kCancelled: return "CancelledError";
    case absl::StatusCode::kUnimplemented: return "UnimplementedError";
    case absl::StatusCode::kPermissionDenied: return "PermissionDeniedError";
    case absl::StatusCode::kUnauthenticated: return "UnauthenticatedError";
    default: return "Error";
  }
}

}  // namespace

void RaiseStatus(const absl::Status& status) {
  // The classes live in Python (tfdata/errors.py) so that they can also derive from the builtin
  // exception a Python user expects (ValueError, LookupError, ConnectionError, TimeoutError).
  nb::object errors = nb::module_::import_("tfdata.errors");
  nb::object cls = errors.attr(ClassFor(status.code()));
  PyErr_SetString(cls.ptr(), std::string(status.message()).c_str());
  throw nb::python_error();
}

}  // namespace tfdata::python
