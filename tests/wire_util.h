// Test helpers for GetElements response bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "lib/service/common/elements_wire.h"

namespace tfdata::service {

// The encoder's ranges as one string.
inline std::string Join(const EncodedElements& e) {
  std::string out;
  for (const auto& [p, n] : e.ranges) out.append(static_cast<const char*>(p), n);
  return out;
}

inline std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace tfdata::service
