// Tensors and elements: the values a pipeline produces.
//
// Glossary
//   DType    the type of one value (bool, intN, uintN, float32/64, string).
//   Tensor   a dtype, a shape of any rank, and its values in row-major order.
//   Element  what a pipeline yields: a tuple (std::vector) of tensors.
//
// Ownership and thread safety: a Tensor holds its values through a shared, immutable buffer,
// so copying a Tensor or an Element is cheap (a reference-count bump) and never copies the
// payload. A Tensor is a value type: distinct Tensor objects may be used from different
// threads at once; one Tensor object is not synchronized. Mutable access (`mutable_data`)
// is only for the code that just created the tensor, before it is shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tfdata {

enum class DType : uint8_t {
  kBool = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kUInt8 = 6,
  kUInt16 = 7,
  kUInt32 = 8,
  kUInt64 = 9,
  kFloat32 = 10,
  kFloat64 = 11,
  kString = 12,
};

// Size in bytes of one value; 0 for kString (variable length).
size_t DTypeSize(DType dtype);
// "int64", "float32", "string", ... (the names used in pipeline text and in errors).
const char* DTypeName(DType dtype);
// Parses a name produced by DTypeName ("bytes" is accepted for string).
absl::StatusOr<DType> DTypeFromName(std::string_view name);
bool IsValidDType(uint8_t raw);
bool IsInteger(DType dtype);
bool IsFloat(DType dtype);

// Maps C++ types to dtypes for the typed accessors.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kInt8;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::kInt16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::kUInt16;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::kUInt32;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::kUInt64;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};

// An immutable-once-shared block of bytes, 64-byte aligned. Buffers can also wrap memory owned
// by someone else (e.g. a received message) through `owner`, which is kept alive with them.
class Buffer {
 public:
  // Allocates `size` bytes (uninitialized).
  static std::shared_ptr<Buffer> Allocate(size_t size);
  // Wraps `data[0, size)`; `owner` keeps that memory alive for the Buffer's lifetime.
  static std::shared_ptr<Buffer> Wrap(const uint8_t* data, size_t size, std::shared_ptr<const void> owner);

  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const uint8_t* data() const { return data_; }
  uint8_t* mutable_data() { return const_cast<uint8_t*>(data_); }
  size_t size() const { return size_; }

 private:
  Buffer() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;
  std::shared_ptr<const void> owner_;
};

using Shape = std::vector<int64_t>;

// Number of values in a shape (1 for a scalar).
int64_t NumElements(const Shape& shape);
// "[2, 3]"; "[]" for a scalar.
std::string ShapeString(const Shape& shape);

class Tensor {
 public:
  // The int64 scalar 0 (no allocation).
  Tensor() = default;

  // A zero-initialized numeric tensor, or a tensor of empty strings.
  static Tensor Zeros(DType dtype, Shape shape);
  // A numeric tensor over an existing buffer region: `bytes` must equal NumElements(shape) * size.
  static absl::StatusOr<Tensor> FromBuffer(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset,
                                           size_t bytes);
  // A string tensor from its values (row-major).
  static Tensor Strings(Shape shape, std::vector<std::string> values);
  static Tensor String(std::string value) { return Strings({}, {std::move(value)}); }

  template <typename T>
  static Tensor Scalar(T value) {
    Tensor t = Zeros(DTypeOf<T>::value, {});
    std::memcpy(t.mutable_raw(), &value, sizeof(T));
    return t;
  }
  template <typename T>
  static Tensor Vector(const std::vector<T>& values) {
    return FromVector<T>({static_cast<int64_t>(values.size())}, values);
  }
  template <typename T>
  static Tensor FromVector(Shape shape, const std::vector<T>& values) {
    Tensor t = Zeros(DTypeOf<T>::value, std::move(shape));
    if constexpr (std::is_same_v<T, bool>) {
      bool* out = t.mutable_data<bool>();
      for (size_t i = 0; i < values.size() && i < static_cast<size_t>(t.num_elements()); ++i) out[i] = values[i];
    } else if (!values.empty()) {  // memcpy from the null data() of an empty vector is UB
      std::memcpy(t.mutable_raw(), values.data(), std::min(values.size() * sizeof(T), t.nbytes()));
    }
    return t;
  }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const { return NumElements(shape_); }
  bool is_string() const { return dtype_ == DType::kString; }

  // Numeric payload (row-major). Empty for string tensors.
  const uint8_t* raw() const;
  size_t nbytes() const { return nbytes_; }
  // Only valid on a tensor not yet shared (see header comment).
  uint8_t* mutable_raw();

  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(raw());
  }
  template <typename T>
  T* mutable_data() {
    return reinterpret_cast<T*>(mutable_raw());
  }
  template <typename T>
  std::span<const T> values() const {
    return {data<T>(), static_cast<size_t>(num_elements())};
  }

  // String values (row-major). Empty for numeric tensors.
  const std::vector<std::string>& strings() const;
  std::vector<std::string>& mutable_strings();

  // The underlying buffer (numeric tensors). Null for small tensors (<= kInlineBytes), whose
  // values live inside the Tensor object itself.
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  static constexpr size_t kInlineBytes = 16;

  // Total payload bytes: numeric bytes, or the sum of string lengths.
  size_t ByteSize() const;

  // Value `i` (row-major) converted to double / int64 (numeric and bool tensors only).
  double GetAsDouble(int64_t i) const;
  int64_t GetAsInt64(int64_t i) const;

  // Sub-tensor `index` along dimension 0 (shares the buffer for numeric tensors).
  absl::StatusOr<Tensor> Slice(int64_t index) const;
  // Same dtype and shape with a new shape of equal element count (shares the buffer).
  absl::StatusOr<Tensor> Reshape(Shape shape) const;

  // Deep equality: dtype, shape and values.
  bool operator==(const Tensor& other) const;
  bool operator!=(const Tensor& other) const { return !(*this == other); }

  // "int64[2, 3]"
  std::string TypeString() const;
  // numpy-like rendering: scalars as plain values ("7", "1.5", "b'abc'"), arrays nested "[[1 2] [3 4]]".
  // Arrays longer than `max_values` are elided with "...".
  std::string DebugString(int64_t max_values = 64) const;

 private:
  DType dtype_ = DType::kInt64;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;  // numeric, unless inline
  size_t offset_ = 0;
  size_t nbytes_ = 8;
  // Scalars and tiny tensors avoid a heap allocation: a pipeline of scalars (range) is then
  // allocation-free per element.
  alignas(8) uint8_t inline_[kInlineBytes] = {};
  std::shared_ptr<std::vector<std::string>> strings_;  // string
};

using Element = std::vector<Tensor>;

// "(int64[], string[3])"
std::string ElementTypeString(const Element& element);
// Total payload bytes of all components.
size_t ElementByteSize(const Element& element);
// A scalar element renders as its value; tuples as "(a, b)".
std::string ElementDebugString(const Element& element, int64_t max_values = 64);

// Stacks tensors of identical dtype and shape into one tensor with a new leading dimension.
absl::StatusOr<Tensor> Stack(const std::vector<Tensor>& tensors);

}  // namespace tfdata
