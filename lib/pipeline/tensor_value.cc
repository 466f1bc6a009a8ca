// Inline tensors written in pipeline text (TensorValue) to Tensors.
#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/functions/function.h"
#include "lib/pipeline/ops.h"

namespace tfdata {
namespace {

template <typename T, typename Src>
absl::StatusOr<Tensor> Fill(Shape shape, const Src& values) {
  Tensor t = Tensor::Zeros(DTypeOf<T>::value, std::move(shape));
  T* out = t.template mutable_data<T>();
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Reject values the dtype cannot hold instead of wrapping (300 as int8 is a typo, not 44).
      if ((std::is_unsigned_v<T> && v < 0) || static_cast<decltype(v)>(static_cast<T>(v)) != v) {
        return absl::InvalidArgumentError(
            fmt::format("tensor: value {} does not fit in {}", v, DTypeName(DTypeOf<T>::value)));
      }
    }
    out[i] = static_cast<T>(v);
  }
  return t;
}

}  // namespace

absl::StatusOr<Tensor> TensorFromProto(const pipeline::TensorValue& value) {
  TFD_ASSIGN_OR_RETURN(DType dtype, FromProtoDType(value.dtype()));
  size_t count = 0;
  const char* field = "";
  int used = 0;
  if (value.int_values_size() > 0) ++used;
  if (value.float_values_size() > 0) ++used;
  if (value.bool_values_size() > 0) ++used;
  if (value.string_values_size() > 0) ++used;
  if (used > 1) return absl::InvalidArgumentError("tensor: give values in one list only");
  if (IsInteger(dtype)) {
    count = static_cast<size_t>(value.int_values_size());
    field = "int_values";
  } else if (IsFloat(dtype)) {
    count = static_cast<size_t>(value.float_values_size());
    field = "float_values";
  } else if (dtype == DType::kBool) {
    count = static_cast<size_t>(value.bool_values_size());
    field = "bool_values";
  } else {
    count = static_cast<size_t>(value.string_values_size());
    field = "string_values";
  }
  if (used == 1 && count == 0) {
    return absl::InvalidArgumentError(
        fmt::format("tensor of dtype {}: values must be given in {}", DTypeName(dtype), field));
  }
  Shape shape;
  if (value.scalar()) {
    if (value.shape_size() > 0) return absl::InvalidArgumentError("tensor: `scalar: true` and `shape` both given");
  } else if (value.shape_size() > 0) {
    int64_t product = 1;
    for (int64_t d : value.shape()) {
      if (d < 0) return absl::InvalidArgumentError(fmt::format("tensor: negative dimension {} in shape", d));
      shape.push_back(d);
      // A shape whose size does not fit would wrap and could pass the count check below.
      if (__builtin_mul_overflow(product, d, &product) || product > (int64_t{1} << 56)) {
        return absl::InvalidArgumentError(fmt::format("tensor: shape {}... is too large", ShapeString(shape)));
      }
    }
  } else {
    shape.push_back(static_cast<int64_t>(count));
  }
  const int64_t want = NumElements(shape);
  if (want != static_cast<int64_t>(count)) {
    return absl::InvalidArgumentError(
        fmt::format("tensor: shape {} needs {} values, {} has {}", ShapeString(shape), want, field, count));
  }
  switch (dtype) {
    case DType::kBool: return Fill<bool>(shape, value.bool_values());
    case DType::kInt8: return Fill<int8_t>(shape, value.int_values());
    case DType::kInt16: return Fill<int16_t>(shape, value.int_values());
    case DType::kInt32: return Fill<int32_t>(shape, value.int_values());
    case DType::kInt64: return Fill<int64_t>(shape, value.int_values());
    case DType::kUInt8: return Fill<uint8_t>(shape, value.int_values());
    case DType::kUInt16: return Fill<uint16_t>(shape, value.int_values());
    case DType::kUInt32: return Fill<uint32_t>(shape, value.int_values());
    case DType::kUInt64: return Fill<uint64_t>(shape, value.int_values());
    case DType::kFloat32: return Fill<float>(shape, value.float_values());
    case DType::kFloat64: return Fill<double>(shape, value.float_values());
    case DType::kString:
      return Tensor::Strings(shape,
                             std::vector<std::string>(value.string_values().begin(), value.string_values().end()));
  }
  return absl::InternalError("unreachable dtype");
}

}  // namespace tfdata
