// The one place where the binding turns absl::Status into Python exceptions (tfdata.errors):
// lib/ reports errors as Status, and every binding function that calls it goes through here.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tfdata::python {

// Raises the tfdata.errors class for the status code (e.g. InvalidArgumentError, which is also a
// ValueError), with the status message: the same text the CLI prints after "tfdata: error: ".
[[noreturn]] void RaiseStatus(const absl::Status& status);

inline void RaiseIfError(const absl::Status& status) {
  if (!status.ok()) RaiseStatus(status);
}

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  if (!value.ok()) RaiseStatus(value.status());
  return *std::move(value);
}

}  // namespace tfdata::python
