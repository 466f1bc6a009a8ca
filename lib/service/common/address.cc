#include "lib/service/common/address.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tfdata::service {

absl::StatusOr<std::string> ParseAddress(std::string_view address, std::string_view flag) {
  std::string_view a = address;
  if (a.starts_with("grpc://")) a.remove_prefix(7);
  const size_t colon = a.rfind(':');
  int port = 0;
  if (colon == std::string_view::npos || colon == 0 || !absl::SimpleAtoi(std::string(a.substr(colon + 1)), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(flag), ": \"", std::string(address),
                                                   "\" is not an address (expected HOST:PORT or grpc://HOST:PORT)"));
  }
  return std::string(a);
}

}  // namespace tfdata::service
