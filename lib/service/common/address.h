// Server addresses as users write them (flags, Python, the pipeline's service options). Stateless
// and thread-safe. Here, not in grpc/, so that parsing an address needs no gRPC.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tfdata::service {

// "grpc://host:port" or "host:port" -> "host:port". InvalidArgument (naming `flag`) for anything
// else, e.g. a missing or non-numeric port.
absl::StatusOr<std::string> ParseAddress(std::string_view address, std::string_view flag = "address");

}  // namespace tfdata::service
