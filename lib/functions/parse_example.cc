// parse_example: a serialized tf.train.Example (string scalar) -> one tensor per feature.
//
// The spec is validated once at creation (defaults are converted to tensors then), so Apply only
// parses and copies. Apply keeps no mutable state, so it is thread-safe.
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_set>

#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/functions/function.h"
#include "proto/example.pb.h"

namespace tfdata {
namespace {

constexpr std::string_view kFn = "parse_example";

struct FeatureInfo {
  std::string name;
  DType dtype = DType::kInt64;
  Shape shape;  // fixed shape; unused when var_len
  bool var_len = false;
  std::optional<Tensor> default_value;  // already in the output shape
};

// The list a feature of `dtype` must use in the Example.
const char* ListName(DType dtype) {
  switch (dtype) {
    case DType::kInt64: return "int64_list";
    case DType::kFloat32: return "float_list";
    default: return "bytes_list";
  }
}

absl::Status ValueCountError(const FeatureInfo& f, const char* what, int64_t got) {
  return absl::InvalidArgumentError(fmt::format("{}: feature '{}' {} has {} value(s); expected {} for shape {}", kFn,
                                                f.name, what, got, NumElements(f.shape), ShapeString(f.shape)));
}

// Shape of `count` values of feature `f`, or an error if a fixed shape does not hold them.
absl::StatusOr<Shape> OutputShape(const FeatureInfo& f, const char* what, int64_t count) {
  if (f.var_len) return Shape{count};
  if (count != NumElements(f.shape)) return ValueCountError(f, what, count);
  return f.shape;
}

// Converts the default TensorValue. Only its value lists are used (laid out in the feature's
// shape): string_values for STRING; int_values or float_values (integral) for INT64;
// float_values or int_values for FLOAT32.
absl::StatusOr<Tensor> DefaultTensor(const FeatureInfo& f, const pipeline::TensorValue& v) {
  const char* what = "default_value";
  auto wrong = [&](const char* list) {
    return absl::InvalidArgumentError(fmt::format("{}: feature '{}' default_value has {} but the feature's dtype is {}",
                                                  kFn, f.name, list, DTypeName(f.dtype)));
  };
  if (v.bool_values_size() > 0) return wrong("bool_values");
  if (f.dtype == DType::kString) {
    if (v.int_values_size() > 0 || v.float_values_size() > 0) return wrong("numeric values");
    TFD_ASSIGN_OR_RETURN(Shape shape, OutputShape(f, what, v.string_values_size()));
    return Tensor::Strings(std::move(shape), {v.string_values().begin(), v.string_values().end()});
  }
  if (v.string_values_size() > 0) return wrong("string_values");
  if (v.int_values_size() > 0 && v.float_values_size() > 0) return wrong("both int_values and float_values");
  const bool from_ints = v.int_values_size() > 0;
  const int64_t count = from_ints ? v.int_values_size() : v.float_values_size();
  TFD_ASSIGN_OR_RETURN(Shape shape, OutputShape(f, what, count));
  Tensor t = Tensor::Zeros(f.dtype, std::move(shape));
  for (int64_t i = 0; i < count; ++i) {
    const int idx = static_cast<int>(i);
    if (f.dtype == DType::kFloat32) {
      t.mutable_data<float>()[i] =
          from_ints ? static_cast<float>(v.int_values(idx)) : static_cast<float>(v.float_values(idx));
    } else if (from_ints) {
      t.mutable_data<int64_t>()[i] = v.int_values(idx);
    } else {
      const double d = v.float_values(idx);
      // 2^63 bounds: outside them the cast is undefined.
      if (d != std::trunc(d) || !(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
        return absl::InvalidArgumentError(
            fmt::format("{}: feature '{}' default_value {} is not an int64", kFn, f.name, d));
      }
      t.mutable_data<int64_t>()[i] = static_cast<int64_t>(d);
    }
  }
  return t;
}

absl::StatusOr<FeatureInfo> ValidateFeature(const pipeline::FeatureSpec& spec, int index) {
  FeatureInfo f;
  f.name = spec.name();
  if (f.name.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: feature {} has no name", kFn, index));
  }
  auto dtype = FromProtoDType(spec.dtype());
  if (!dtype.ok() || (*dtype != DType::kInt64 && *dtype != DType::kFloat32 && *dtype != DType::kString)) {
    return absl::InvalidArgumentError(fmt::format("{}: feature '{}' dtype must be INT64, FLOAT32 or STRING, got {}",
                                                  kFn, f.name, pipeline::DataType_Name(spec.dtype())));
  }
  f.dtype = *dtype;
  f.var_len = spec.var_len();
  if (!f.var_len) {
    int64_t count = 1;
    for (int64_t d : spec.shape()) {
      if (d < 0 || __builtin_mul_overflow(count, d, &count)) {
        return absl::InvalidArgumentError(
            fmt::format("{}: feature '{}' has an invalid shape [{}]", kFn, f.name, fmt::join(spec.shape(), ", ")));
      }
    }
    f.shape.assign(spec.shape().begin(), spec.shape().end());
  }
  if (spec.has_default_value()) {
    TFD_ASSIGN_OR_RETURN(Tensor t, DefaultTensor(f, spec.default_value()));
    f.default_value = std::move(t);
  }
  return f;
}

class ParseExampleFn final : public Function {
 public:
  ParseExampleFn(int component, std::vector<FeatureInfo> features)
      : component_(component), features_(std::move(features)) {}

  std::string_view name() const override { return kFn; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    TFD_RETURN_IF_ERROR(CheckComponent(kFn, component_, input));
    if (input.unknown) return ElementSpec::Unknown();
    const TensorSpec& in = input.components[component_];
    if (in.dtype != DType::kString || (!in.unknown_rank && !in.shape.empty())) {
      return NotStringScalar(in.DebugString());
    }
    ElementSpec out;
    out.components.assign(input.components.begin(), input.components.begin() + component_);
    for (const FeatureInfo& f : features_) {
      out.components.push_back(TensorSpec{f.dtype, f.var_len ? Shape{-1} : f.shape, false});
    }
    out.components.insert(out.components.end(), input.components.begin() + component_ + 1, input.components.end());
    return out;
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext&) const override {
    TFD_RETURN_IF_ERROR(CheckComponent(kFn, component_, input.size()));
    const Tensor& in = input[component_];
    if (!in.is_string() || in.rank() != 0) return NotStringScalar(in.TypeString());
    const std::string& bytes = in.strings()[0];
    tensorflow::Example example;
    if (bytes.size() > static_cast<size_t>(INT_MAX) ||
        !example.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return absl::InvalidArgumentError(
          fmt::format("{}: component {} is not a serialized tf.train.Example", kFn, component_));
    }
    const auto& map = example.features().feature();
    std::vector<Tensor> parsed;
    parsed.reserve(features_.size());
    for (const FeatureInfo& f : features_) {
      auto it = map.find(f.name);
      // A feature with no list at all is missing to a fixed-length spec, as in TensorFlow
      // (default, or "missing"); to a var_len one it is no values.
      const bool absent =
          it == map.end() || (!f.var_len && it->second.kind_case() == tensorflow::Feature::KIND_NOT_SET);
      if (absent) {
        if (!f.default_value) {
          return absl::InvalidArgumentError(fmt::format("{}: feature '{}' missing and has no default", kFn, f.name));
        }
        parsed.push_back(*f.default_value);
        continue;
      }
      TFD_ASSIGN_OR_RETURN(Tensor t, Convert(f, it->second));
      parsed.push_back(std::move(t));
    }
    Element out;
    out.reserve(input.size() - 1 + parsed.size());
    for (int i = 0; i < component_; ++i) out.push_back(std::move(input[i]));
    for (Tensor& t : parsed) out.push_back(std::move(t));
    for (size_t i = component_ + 1; i < input.size(); ++i) out.push_back(std::move(input[i]));
    return out;
  }

 private:
  absl::Status NotStringScalar(const std::string& got) const {
    return absl::InvalidArgumentError(fmt::format(
        "{}: component {} must be a string scalar (a serialized tf.train.Example), got {}", kFn, component_, got));
  }

  static absl::StatusOr<Tensor> Convert(const FeatureInfo& f, const tensorflow::Feature& feature) {
    using K = tensorflow::Feature::KindCase;
    const K kind = feature.kind_case();
    const K want = f.dtype == DType::kInt64     ? K::kInt64List
                   : f.dtype == DType::kFloat32 ? K::kFloatList
                                                : K::kBytesList;
    // An empty Feature (no list set) reaches here only for var_len: no values, of any type.
    if (kind != want && kind != K::KIND_NOT_SET) {
      const char* got = kind == K::kInt64List ? "int64_list" : kind == K::kFloatList ? "float_list" : "bytes_list";
      return absl::InvalidArgumentError(fmt::format("{}: feature '{}' is a {} but the spec's dtype {} needs a {}", kFn,
                                                    f.name, got, DTypeName(f.dtype), ListName(f.dtype)));
    }
    if (f.dtype == DType::kString) {
      const auto& values = feature.bytes_list().value();
      TFD_ASSIGN_OR_RETURN(Shape shape, OutputShape(f, "in the example", values.size()));
      return Tensor::Strings(std::move(shape), {values.begin(), values.end()});
    }
    if (f.dtype == DType::kFloat32) return Numeric<float>(f, feature.float_list().value());
    return Numeric<int64_t>(f, feature.int64_list().value());
  }

  template <typename T, typename Repeated>
  static absl::StatusOr<Tensor> Numeric(const FeatureInfo& f, const Repeated& values) {
    static_assert(sizeof(*values.data()) == sizeof(T));
    TFD_ASSIGN_OR_RETURN(Shape shape, OutputShape(f, "in the example", values.size()));
    Tensor t = Tensor::Zeros(DTypeOf<T>::value, std::move(shape));
    if (!values.empty()) std::memcpy(t.mutable_raw(), values.data(), values.size() * sizeof(T));
    return t;
  }

  int component_;
  std::vector<FeatureInfo> features_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Function>> MakeParseExample(const pipeline::ParseExample& spec) {
  if (spec.feature_size() == 0) {
    return absl::InvalidArgumentError(fmt::format("{}: no features given (add `feature {{ name: ... }}`)", kFn));
  }
  std::vector<FeatureInfo> features;
  std::unordered_set<std::string> names;
  for (int i = 0; i < spec.feature_size(); ++i) {
    TFD_ASSIGN_OR_RETURN(FeatureInfo f, ValidateFeature(spec.feature(i), i));
    if (!names.insert(f.name).second) {
      return absl::InvalidArgumentError(fmt::format("{}: feature '{}' is listed twice", kFn, f.name));
    }
    features.push_back(std::move(f));
  }
  return std::make_unique<ParseExampleFn>(spec.component(), std::move(features));
}

}  // namespace tfdata
