#include "lib/core/tensor.h"

#include "lib/core/dtype_dispatch.h"

#include <cmath>
#include <cstdlib>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fmt/format.h"

namespace tfdata {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8: return 1;
    case DType::kInt16:
    case DType::kUInt16: return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32: return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64: return 8;
    case DType::kString: return 0;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kString: return "string";
  }
  return "invalid";
}

absl::StatusOr<DType> DTypeFromName(std::string_view name) {
  for (uint8_t raw = 1; raw <= 12; ++raw) {
    DType d = static_cast<DType>(raw);
    if (std::string_view(DTypeName(d)) == name) return d;
  }
  if (name == "bytes") return DType::kString;
  return absl::InvalidArgumentError(fmt::format(
      "unknown dtype '{}' (expected one of bool, int8..int64, uint8..uint64, float32, float64, string)", name));
}

bool IsValidDType(uint8_t raw) { return raw >= 1 && raw <= 12; }
bool IsInteger(DType d) {
  return d != DType::kBool && d != DType::kFloat32 && d != DType::kFloat64 && d != DType::kString;
}
bool IsFloat(DType d) { return d == DType::kFloat32 || d == DType::kFloat64; }

// ---- Buffer -------------------------------------------------------------------------------

std::shared_ptr<Buffer> Buffer::Allocate(size_t size) {
  auto b = std::shared_ptr<Buffer>(new Buffer());
  if (size > 0) {
    b->data_ = static_cast<uint8_t*>(::operator new(size, std::align_val_t(64)));
    b->owned_ = true;
  }
  b->size_ = size;
  return b;
}

std::shared_ptr<Buffer> Buffer::Wrap(const uint8_t* data, size_t size, std::shared_ptr<const void> owner) {
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = data;
  b->size_ = size;
  b->owner_ = std::move(owner);
  return b;
}

Buffer::~Buffer() {
  if (owned_) ::operator delete(const_cast<uint8_t*>(data_), std::align_val_t(64));
}

// ---- Shapes -------------------------------------------------------------------------------

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

// ---- Tensor -------------------------------------------------------------------------------

Tensor Tensor::Zeros(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const int64_t n = NumElements(t.shape_);
  if (dtype == DType::kString) {
    t.nbytes_ = 0;
    t.strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(n));
  } else {
    t.nbytes_ = static_cast<size_t>(n) * DTypeSize(dtype);
    if (t.nbytes_ > kInlineBytes) {
      t.buffer_ = Buffer::Allocate(t.nbytes_);
      std::memset(t.buffer_->mutable_data(), 0, t.nbytes_);
    }
  }
  return t;
}

absl::StatusOr<Tensor> Tensor::FromBuffer(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset,
                                          size_t bytes) {
  if (dtype == DType::kString) return absl::InvalidArgumentError("FromBuffer: string tensors have no buffer");
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in shape ", ShapeString(shape)));
  }
  const size_t want = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  if (want != bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", DTypeName(dtype), ShapeString(shape), " needs ", want, " bytes, got ", bytes));
  }
  if (bytes > 0 && (!buffer || offset > buffer->size() || buffer->size() - offset < bytes)) {
    return absl::InvalidArgumentError("tensor bytes lie outside their buffer");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.buffer_ = std::move(buffer);
  t.offset_ = offset;
  t.nbytes_ = bytes;
  return t;
}

Tensor Tensor::Strings(Shape shape, std::vector<std::string> values) {
  Tensor t;
  t.dtype_ = DType::kString;
  t.nbytes_ = 0;
  t.shape_ = std::move(shape);
  values.resize(static_cast<size_t>(NumElements(t.shape_)));
  t.strings_ = std::make_shared<std::vector<std::string>>(std::move(values));
  return t;
}

const uint8_t* Tensor::raw() const {
  if (buffer_) return buffer_->data() + offset_;
  return dtype_ == DType::kString ? nullptr : inline_;
}

uint8_t* Tensor::mutable_raw() {
  if (buffer_) return buffer_->mutable_data() + offset_;
  return dtype_ == DType::kString ? nullptr : inline_;
}

const std::vector<std::string>& Tensor::strings() const {
  static const std::vector<std::string> kEmpty;
  return strings_ ? *strings_ : kEmpty;
}

std::vector<std::string>& Tensor::mutable_strings() {
  if (!strings_) strings_ = std::make_shared<std::vector<std::string>>();
  return *strings_;
}

size_t Tensor::ByteSize() const {
  if (dtype_ != DType::kString) return nbytes_;
  size_t n = 0;
  for (const auto& s : strings()) n += s.size();
  return n;
}

double Tensor::GetAsDouble(int64_t i) const {
  if (is_string()) return 0;
  return VisitNumeric(dtype_, [&](auto zero) -> double {
    using T = decltype(zero);
    T v;
    std::memcpy(&v, raw() + i * sizeof(T), sizeof(T));
    return static_cast<double>(v);
  });
}

int64_t Tensor::GetAsInt64(int64_t i) const {
  if (is_string()) return 0;
  return VisitNumeric(dtype_, [&](auto zero) -> int64_t {
    using T = decltype(zero);
    T v;
    std::memcpy(&v, raw() + i * sizeof(T), sizeof(T));
    return static_cast<int64_t>(v);
  });
}

absl::StatusOr<Tensor> Tensor::Slice(int64_t index) const {
  if (shape_.empty()) return absl::InvalidArgumentError("cannot slice a scalar");
  if (index < 0 || index >= shape_[0]) {
    return absl::OutOfRangeError(absl::StrCat("slice index ", index, " out of range for dimension ", shape_[0]));
  }
  Shape sub(shape_.begin() + 1, shape_.end());
  const int64_t n = NumElements(sub);
  if (is_string()) {
    const auto& s = strings();
    return Strings(sub, std::vector<std::string>(s.begin() + index * n, s.begin() + (index + 1) * n));
  }
  const size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype_);
  if (!buffer_) {
    Tensor t = Zeros(dtype_, std::move(sub));
    if (bytes > 0) std::memcpy(t.mutable_raw(), raw() + static_cast<size_t>(index) * bytes, bytes);
    return t;
  }
  return FromBuffer(dtype_, std::move(sub), buffer_, offset_ + static_cast<size_t>(index) * bytes, bytes);
}

absl::StatusOr<Tensor> Tensor::Reshape(Shape shape) const {
  if (NumElements(shape) != num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", ShapeString(shape_), " to ", ShapeString(shape)));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

bool Tensor::operator==(const Tensor& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  if (is_string()) return strings() == o.strings();
  return nbytes_ == o.nbytes_ && (nbytes_ == 0 || std::memcmp(raw(), o.raw(), nbytes_) == 0);
}

std::string Tensor::TypeString() const { return absl::StrCat(DTypeName(dtype_), ShapeString(shape_)); }

static std::string EscapeBytes(const std::string& s) {
  std::string out = "b'";
  for (unsigned char c : s) {
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out += '\'';
  return out;
}

static std::string ValueString(const Tensor& t, int64_t i) {
  if (t.is_string()) return EscapeBytes(t.strings()[static_cast<size_t>(i)]);
  switch (t.dtype()) {
    case DType::kBool: return t.data<bool>()[i] ? "True" : "False";
    case DType::kFloat32:
    case DType::kFloat64: {
      const double v = t.GetAsDouble(i);
      if (std::isnan(v)) return "nan";  // not "-nan": the sign of a NaN means nothing to a reader
      return t.dtype() == DType::kFloat32 ? fmt::format("{}", t.data<float>()[i]) : fmt::format("{}", v);
    }
    case DType::kUInt64: return fmt::format("{}", t.data<uint64_t>()[i]);
    default: return fmt::format("{}", t.GetAsInt64(i));
  }
}

// Renders dimension `dim` of the values starting at `*next`, numpy style.
static void RenderDim(const Tensor& t, size_t dim, int64_t* next, int64_t* budget, std::string* out) {
  const int64_t n = t.shape()[dim];
  out->push_back('[');
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out->push_back(' ');
    if (*budget <= 0) {
      out->append("...");
      break;
    }
    if (dim + 1 == t.shape().size()) {
      out->append(ValueString(t, (*next)++));
      --*budget;
    } else {
      RenderDim(t, dim + 1, next, budget, out);
    }
  }
  out->push_back(']');
}

std::string Tensor::DebugString(int64_t max_values) const {
  if (shape_.empty()) return ValueString(*this, 0);
  std::string out;
  int64_t next = 0;
  int64_t budget = max_values;
  RenderDim(*this, 0, &next, &budget, &out);
  return out;
}

std::string ElementTypeString(const Element& element) {
  std::vector<std::string> parts;
  for (const auto& t : element) parts.push_back(t.TypeString());
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

size_t ElementByteSize(const Element& element) {
  size_t n = 0;
  for (const auto& t : element) n += t.ByteSize();
  return n;
}

std::string ElementDebugString(const Element& element, int64_t max_values) {
  if (element.size() == 1) return element[0].DebugString(max_values);
  std::vector<std::string> parts;
  for (const auto& t : element) parts.push_back(t.DebugString(max_values));
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

absl::StatusOr<Tensor> Stack(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) return absl::InvalidArgumentError("cannot stack zero tensors");
  const Tensor& first = tensors[0];
  Shape shape = first.shape();
  shape.insert(shape.begin(), static_cast<int64_t>(tensors.size()));
  for (const auto& t : tensors) {
    if (t.dtype() != first.dtype() || t.shape() != first.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot batch tensors of different types: ", first.TypeString(),
                                                     " and ", t.TypeString(),
                                                     " (use padded_batch for varying shapes)"));
    }
  }
  if (first.is_string()) {
    std::vector<std::string> values;
    values.reserve(static_cast<size_t>(NumElements(shape)));
    for (const auto& t : tensors) values.insert(values.end(), t.strings().begin(), t.strings().end());
    return Tensor::Strings(std::move(shape), std::move(values));
  }
  Tensor out = Tensor::Zeros(first.dtype(), std::move(shape));
  uint8_t* dst = out.mutable_raw();
  for (const auto& t : tensors) {
    if (t.nbytes() > 0) std::memcpy(dst, t.raw(), t.nbytes());
    dst += t.nbytes();
  }
  return out;
}

}  // namespace tfdata
