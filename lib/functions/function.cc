#include "lib/functions/function.h"

#include <random>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace tfdata {

absl::StatusOr<std::unique_ptr<Function>> CreateFunction(const pipeline::Function& spec,
                                                         const FunctionOptions& options) {
  using K = pipeline::Function::KindCase;
  switch (spec.kind_case()) {
    case K::kParseExample: return MakeParseExample(spec.parse_example());
    case K::kDecodeJpeg: return MakeDecodeJpeg(spec.decode_jpeg(), options.memory);
    case K::kResize: return MakeResize(spec.resize(), options.memory);
    case K::kRandomCrop: return MakeRandomCrop(spec.random_crop());
    case K::kCenterCrop: return MakeCenterCrop(spec.center_crop());
    case K::kRandomFlipLeftRight: return MakeRandomFlipLeftRight(spec.random_flip_left_right());
    case K::kNormalize: return MakeNormalize(spec.normalize());
    case K::kCast: return MakeCast(spec.cast());
    case K::kArith: return MakeArith(spec.arith());
    case K::kCompare: return MakeCompare(spec.compare());
    case K::kTokenize: return MakeTokenize(spec.tokenize(), options.memory, options.paths);
    case K::kSpin: return MakeSpin(spec.spin());
    case K::kSleep: return MakeSleep(spec.sleep());
    case K::kPlugin: return MakePlugin(spec.plugin(), options);
    case K::kSelect: return MakeSelect(spec.select());
    case K::kPython: return MakePython(spec.python(), options);
    case K::KIND_NOT_SET: break;
  }
  return absl::InvalidArgumentError("function has no kind set (expected e.g. `arith { ... }`)");
}

std::vector<absl::StatusOr<std::vector<Element>>> Function::ApplyMany(std::vector<Element> inputs,
                                                                      const FunctionContext& first) const {
  std::vector<absl::StatusOr<std::vector<Element>>> out;
  out.reserve(inputs.size());
  for (auto& r : ApplyBatch(std::move(inputs), first)) {
    if (r.ok()) {
      out.emplace_back(std::vector<Element>{*std::move(r)});
    } else {
      out.emplace_back(r.status());
    }
  }
  return out;
}

std::vector<absl::StatusOr<Element>> Function::ApplyBatch(std::vector<Element> inputs,
                                                          const FunctionContext& first) const {
  std::vector<absl::StatusOr<Element>> out;
  out.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    out.push_back(Apply(std::move(inputs[i]), FunctionContext{first.element_index + i, first.iteration}));
  }
  return out;
}

absl::Status CheckComponent(std::string_view fn, int component, size_t num_components) {
  if (component < 0 || static_cast<size_t>(component) >= num_components) {
    return absl::InvalidArgumentError(
        fmt::format("{}: component {} does not exist; the element has {} component(s)", fn, component, num_components));
  }
  return absl::OkStatus();
}

absl::Status CheckComponent(std::string_view fn, int component, const ElementSpec& spec) {
  if (spec.unknown) return absl::OkStatus();
  return CheckComponent(fn, component, spec.components.size());
}

static uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t ElementSeed(uint64_t seed, const FunctionContext& ctx) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ ctx.element_index) ^ (ctx.iteration * 0x632be59bd9b4e019ULL));
}

uint64_t SeedOrRandom(bool has_seed, uint64_t seed) {
  if (has_seed) return seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

absl::StatusOr<DType> FromProtoDType(pipeline::DataType dtype) {
  const int raw = static_cast<int>(dtype);
  if (!IsValidDType(static_cast<uint8_t>(raw)) || raw > 255) {
    return absl::InvalidArgumentError("dtype is not set (expected e.g. INT64, FLOAT32, STRING)");
  }
  return static_cast<DType>(raw);
}

}  // namespace tfdata
