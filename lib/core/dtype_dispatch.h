// Calls a generic lambda with a value of the C++ type of a numeric (or bool) dtype, so typed
// loops are written once: VisitNumeric(dtype, [&](auto zero) { using T = decltype(zero); ... }).
// For kString the lambda is not called with a string; callers must handle strings first.
#pragma once

#include <cstdint>

#include "lib/core/tensor.h"

namespace tfdata {

template <typename Fn>
auto VisitNumeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBool: return fn(bool{});
    case DType::kInt8: return fn(int8_t{});
    case DType::kInt16: return fn(int16_t{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kUInt16: return fn(uint16_t{});
    case DType::kUInt32: return fn(uint32_t{});
    case DType::kUInt64: return fn(uint64_t{});
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kString: break;
  }
  return fn(int64_t{});
}

}  // namespace tfdata
