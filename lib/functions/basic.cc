// Small built-in functions: cast, arith, compare, select, spin and sleep.
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/dtype_dispatch.h"
#include "lib/core/status_macros.h"
#include "lib/functions/function.h"

namespace tfdata {
namespace {

absl::Status NumericSpec(std::string_view fn, int component, const ElementSpec& in) {
  TFD_RETURN_IF_ERROR(CheckComponent(fn, component, in));
  if (in.unknown) return absl::OkStatus();
  const TensorSpec& t = in.components[static_cast<size_t>(component)];
  if (t.dtype == DType::kString) {
    return absl::InvalidArgumentError(
        fmt::format("{}: component {} must be numeric, got {}", fn, component, t.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status NumericTensor(std::string_view fn, int component, const Element& e) {
  TFD_RETURN_IF_ERROR(CheckComponent(fn, component, e.size()));
  if (e[static_cast<size_t>(component)].is_string()) {
    return absl::InvalidArgumentError(fmt::format("{}: component {} must be numeric, got {}", fn, component,
                                                  e[static_cast<size_t>(component)].TypeString()));
  }
  return absl::OkStatus();
}

// Float -> integer conversion is undefined in C++ for NaN and out-of-range values: saturate
// instead (NaN -> 0), so a cast never has undefined behaviour.
template <typename T, typename F>
T Convert(F x) {
  if constexpr (std::is_floating_point_v<F> && std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (std::isnan(x)) return 0;
    if (x <= static_cast<F>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (x >= static_cast<F>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  }
  return static_cast<T>(x);
}

class CastFn : public Function {
 public:
  CastFn(int component, DType to) : component_(component), to_(to) {}
  std::string_view name() const override { return "cast"; }
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& in) const override {
    TFD_RETURN_IF_ERROR(NumericSpec(name(), component_, in));
    ElementSpec out = in;
    if (!out.unknown) out.components[static_cast<size_t>(component_)].dtype = to_;
    return out;
  }
  absl::StatusOr<Element> Apply(Element e, const FunctionContext&) const override {
    TFD_RETURN_IF_ERROR(NumericTensor(name(), component_, e));
    Tensor& t = e[static_cast<size_t>(component_)];
    if (t.dtype() == to_) return e;
    Tensor out = Tensor::Zeros(to_, t.shape());
    const int64_t n = t.num_elements();
    VisitNumeric(t.dtype(), [&](auto from) {
      using F = decltype(from);
      const F* src = t.data<F>();
      VisitNumeric(to_, [&](auto to) {
        using T = decltype(to);
        T* dst = out.mutable_data<T>();
        for (int64_t i = 0; i < n; ++i) dst[i] = Convert<T>(src[i]);
        return 0;
      });
      return 0;
    });
    t = std::move(out);
    return e;
  }

 private:
  int component_;
  DType to_;
};

class ArithFn : public Function {
 public:
  ArithFn(int component, pipeline::ArithOp op, double value) : component_(component), op_(op), value_(value) {}
  std::string_view name() const override { return "arith"; }
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& in) const override {
    TFD_RETURN_IF_ERROR(NumericSpec(name(), component_, in));
    if (!in.unknown && in.components[static_cast<size_t>(component_)].dtype == DType::kBool) {
      return absl::InvalidArgumentError("arith: bool components have no arithmetic; cast them first");
    }
    if (!in.unknown) TFD_RETURN_IF_ERROR(CheckValue(in.components[static_cast<size_t>(component_)].dtype));
    return in;
  }
  // The value must be exactly representable in the component's dtype: silently turning
  // `MUL 1.5` on int64 into `MUL 1` would be a wrong result, not an error.
  absl::Status CheckValue(DType dtype) const {
    if (!IsInteger(dtype)) return absl::OkStatus();
    const bool representable = VisitNumeric(dtype, [&](auto zero) {
      using T = decltype(zero);
      // max() + 1 is a power of two, exact as a double; max() itself may round up to it.
      return value_ == std::floor(value_) && value_ >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
             value_ < static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
    });
    if (!representable) {
      return absl::InvalidArgumentError(fmt::format(
          "arith: value {} is not a valid {} (cast the component to a float type first)", value_, DTypeName(dtype)));
    }
    if ((op_ == pipeline::DIV || op_ == pipeline::MOD) && value_ == 0) {
      return absl::InvalidArgumentError("arith: integer division by zero");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Element> Apply(Element e, const FunctionContext&) const override {
    TFD_RETURN_IF_ERROR(NumericTensor(name(), component_, e));
    Tensor& t = e[static_cast<size_t>(component_)];
    if (t.dtype() == DType::kBool) return absl::InvalidArgumentError("arith: bool components have no arithmetic");
    TFD_RETURN_IF_ERROR(CheckValue(t.dtype()));
    Tensor out = Tensor::Zeros(t.dtype(), t.shape());
    VisitNumeric(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T v = static_cast<T>(value_);
      const T* src = t.data<T>();
      T* dst = out.mutable_data<T>();
      const int64_t n = t.num_elements();
      for (int64_t i = 0; i < n; ++i) dst[i] = Op<T>(src[i], v);
      return 0;
    });
    t = std::move(out);
    return e;
  }

 private:
  template <typename T>
  T Op(T x, T v) const {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Signed overflow is undefined in C++: compute in the unsigned type, which wraps.
      using U = std::make_unsigned_t<T>;
      switch (op_) {
        case pipeline::ADD: return static_cast<T>(static_cast<U>(x) + static_cast<U>(v));
        case pipeline::SUB: return static_cast<T>(static_cast<U>(x) - static_cast<U>(v));
        case pipeline::MUL: return static_cast<T>(static_cast<U>(x) * static_cast<U>(v));
        case pipeline::DIV:
        case pipeline::MOD:
          if (std::is_signed_v<T> && v == static_cast<T>(-1)) {  // lowest() / -1 overflows
            return op_ == pipeline::MOD ? T{0} : static_cast<T>(U{0} - static_cast<U>(x));
          }
          break;
        default: break;
      }
    }
    switch (op_) {
      case pipeline::ADD: return static_cast<T>(x + v);
      case pipeline::SUB: return static_cast<T>(x - v);
      case pipeline::MUL: return static_cast<T>(x * v);
      case pipeline::DIV:
        if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
          // Floor division, consistent with MOD below (x == (x DIV v) * v + x MOD v), as tf.math.floordiv.
          T q = static_cast<T>(x / v);
          if ((x % v != 0) && ((x < 0) != (v < 0))) q = static_cast<T>(q - 1);
          return q;
        } else {
          return static_cast<T>(x / v);
        }
      case pipeline::MOD:
        if constexpr (std::is_integral_v<T>) {
          // Python/TF floor-mod: the result has the divisor's sign.
          T r = static_cast<T>(x % v);
          if constexpr (std::is_signed_v<T>) {
            if (r != 0 && ((r < 0) != (v < 0))) r = static_cast<T>(r + v);
          }
          return r;
        } else {
          T r = std::fmod(x, v);
          if (r != 0 && ((r < 0) != (v < 0))) r += v;
          return r;
        }
      case pipeline::MIN: return x < v ? x : v;
      case pipeline::MAX: return x > v ? x : v;
      default: return x;
    }
  }
  int component_;
  pipeline::ArithOp op_;
  double value_;
};

class CompareFn : public Function {
 public:
  CompareFn(int component, pipeline::CompareOp op, double value) : component_(component), op_(op), value_(value) {}
  std::string_view name() const override { return "compare"; }
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& in) const override {
    TFD_RETURN_IF_ERROR(NumericSpec(name(), component_, in));
    if (!in.unknown) {
      const TensorSpec& t = in.components[static_cast<size_t>(component_)];
      if (t.unknown_rank || !t.shape.empty()) {
        return absl::InvalidArgumentError(
            fmt::format("compare: component {} must be a scalar, got {}", component_, t.DebugString()));
      }
    }
    return ElementSpec{{TensorSpec{DType::kBool, {}}}};
  }
  absl::StatusOr<Element> Apply(Element e, const FunctionContext&) const override {
    TFD_RETURN_IF_ERROR(NumericTensor(name(), component_, e));
    const Tensor& t = e[static_cast<size_t>(component_)];
    if (t.rank() != 0) {
      return absl::InvalidArgumentError(
          fmt::format("compare: component {} must be a scalar, got {}", component_, t.TypeString()));
    }
    // Integers compare exactly as int64 when the value is integral (doubles lose precision past 2^53).
    bool r;
    if (IsInteger(t.dtype()) && value_ == std::floor(value_) && std::fabs(value_) < 9.2e18) {
      r = Cmp<int64_t>(t.GetAsInt64(0), static_cast<int64_t>(value_));
    } else {
      r = Cmp<double>(t.GetAsDouble(0), value_);
    }
    return Element{Tensor::Scalar<bool>(r)};
  }

 private:
  template <typename T>
  bool Cmp(T x, T v) const {
    switch (op_) {
      case pipeline::LT: return x < v;
      case pipeline::LE: return x <= v;
      case pipeline::EQ: return x == v;
      case pipeline::NE: return x != v;
      case pipeline::GT: return x > v;
      case pipeline::GE: return x >= v;
      default: return false;
    }
  }
  int component_;
  pipeline::CompareOp op_;
  double value_;
};

class SelectFn : public Function {
 public:
  explicit SelectFn(std::vector<int> components) : components_(std::move(components)) {}
  std::string_view name() const override { return "select"; }
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& in) const override {
    if (in.unknown) return in;
    ElementSpec out;
    for (int c : components_) {
      TFD_RETURN_IF_ERROR(CheckComponent(name(), c, in));
      out.components.push_back(in.components[static_cast<size_t>(c)]);
    }
    return out;
  }
  absl::StatusOr<Element> Apply(Element e, const FunctionContext&) const override {
    Element out;
    for (int c : components_) {
      TFD_RETURN_IF_ERROR(CheckComponent(name(), c, e.size()));
      out.push_back(e[static_cast<size_t>(c)]);
    }
    return out;
  }

 private:
  std::vector<int> components_;
};

// spin burns CPU (a stand-in for real preprocessing cost); sleep waits (a stand-in for I/O).
class DelayFn : public Function {
 public:
  DelayFn(bool spin, int64_t micros) : spin_(spin), micros_(micros) {}
  std::string_view name() const override { return spin_ ? "spin" : "sleep"; }
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& in) const override { return in; }
  absl::StatusOr<Element> Apply(Element e, const FunctionContext&) const override {
    if (micros_ <= 0) return e;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros_);
    if (!spin_) {
      std::this_thread::sleep_until(until);
      return e;
    }
    volatile uint64_t sink = 0;
    while (std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < 64; ++i) sink = sink * 6364136223846793005ULL + 1;
    }
    return e;
  }

 private:
  bool spin_;
  int64_t micros_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Function>> MakeCast(const pipeline::Cast& spec) {
  auto to = FromProtoDType(spec.dtype());
  if (!to.ok()) return absl::InvalidArgumentError("cast: dtype is not set (expected e.g. FLOAT32)");
  if (*to == DType::kString) return absl::InvalidArgumentError("cast: cannot cast to STRING");
  return std::make_unique<CastFn>(spec.component(), *to);
}

absl::StatusOr<std::unique_ptr<Function>> MakeArith(const pipeline::Arith& spec) {
  if (spec.op() == pipeline::ARITH_UNSPECIFIED) {
    return absl::InvalidArgumentError("arith: op is not set (expected ADD, SUB, MUL, DIV, MOD, MIN or MAX)");
  }
  if (spec.op() == pipeline::MOD && spec.value() == 0) return absl::InvalidArgumentError("arith: MOD by 0");
  return std::make_unique<ArithFn>(spec.component(), spec.op(), spec.value());
}

absl::StatusOr<std::unique_ptr<Function>> MakeCompare(const pipeline::Compare& spec) {
  if (spec.op() == pipeline::COMPARE_UNSPECIFIED) {
    return absl::InvalidArgumentError("compare: op is not set (expected LT, LE, EQ, NE, GT or GE)");
  }
  return std::make_unique<CompareFn>(spec.component(), spec.op(), spec.value());
}

absl::StatusOr<std::unique_ptr<Function>> MakeSelect(const pipeline::Select& spec) {
  if (spec.component_size() == 0) return absl::InvalidArgumentError("select: list at least one component");
  return std::make_unique<SelectFn>(std::vector<int>(spec.component().begin(), spec.component().end()));
}

namespace {

// A delay is a stand-in for work on one element: at most 10 s, so that a stopping worker never
// waits longer than that for a task inside one (a task is cancelled between elements).
constexpr int64_t kMaxDelayMicros = 10'000'000;

absl::Status CheckDelay(std::string_view name, int64_t micros) {
  if (micros < 0 || micros > kMaxDelayMicros) {
    return absl::InvalidArgumentError(
        fmt::format("{}: micros must be between 0 and {} (10 s), got {}", name, kMaxDelayMicros, micros));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Function>> MakeSpin(const pipeline::Spin& spec) {
  TFD_RETURN_IF_ERROR(CheckDelay("spin", spec.micros()));
  return std::make_unique<DelayFn>(true, spec.micros());
}

absl::StatusOr<std::unique_ptr<Function>> MakeSleep(const pipeline::Sleep& spec) {
  TFD_RETURN_IF_ERROR(CheckDelay("sleep", spec.micros()));
  return std::make_unique<DelayFn>(false, spec.micros());
}

}  // namespace tfdata
