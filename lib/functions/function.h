// Functions applied by `map` and `filter`.
//
// A Function is created once from its pipeline::Function proto (CreateFunction validates the
// arguments), then applied to many elements. Apply is const and must be thread-safe: parallel
// map calls it from several threads at once. Randomness must be derived from the seed and the
// FunctionContext (never from shared mutable state) so that a seeded pipeline yields the same
// elements on every run, whatever the parallelism.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/element_spec.h"
#include "lib/core/memory_budget.h"
#include "lib/core/tensor.h"
#include "lib/functions/python_host.h"
#include "lib/io/path_policy.h"
#include "proto/pipeline.pb.h"

namespace tfdata {

// Where an element is in the stream, for deterministic per-element randomness.
struct FunctionContext {
  uint64_t element_index = 0;  // position of the element in the map's input (from 0)
  uint64_t iteration = 0;      // how many times the map's iterator was created before (epochs)
};

class Function {
 public:
  virtual ~Function() = default;
  // Name used in errors, e.g. "decode_jpeg".
  virtual std::string_view name() const = 0;
  // The output spec for an input spec, or an error saying what was expected (dtype, rank,
  // component count). Called during validation. An input with `unknown` set must be accepted.
  virtual absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const = 0;
  // Thread-safe. Errors say what was wrong with the element.
  virtual absl::StatusOr<Element> Apply(Element input, const FunctionContext& ctx) const = 0;
  // Whether ApplyBatch and ApplyMany are cheaper per element than Apply (a call to another
  // process): map, filter and flat_map then hand such a function whole chunks.
  virtual bool batches() const { return false; }
  // Applies the function to consecutive inputs, `first` being the context of inputs[0]; one
  // result per input. The default calls Apply on each.
  virtual std::vector<absl::StatusOr<Element>> ApplyBatch(std::vector<Element> inputs,
                                                          const FunctionContext& first) const;
  // For flat_map: the elements each input becomes, one list per input. The default is Apply's
  // one element each; a python function made for flat_map returns its lists.
  virtual std::vector<absl::StatusOr<std::vector<Element>>> ApplyMany(std::vector<Element> inputs,
                                                                      const FunctionContext& first) const;
};

struct FunctionOptions {
  // Plugins (shared libraries) are loaded only when allowed (workers need an explicit flag).
  bool allow_plugins = true;
  // The budget that the function's outputs are checked against, and its place for errors
  // ("op 2 (map) > fn 0 (resize)"); set by the builder.
  MemoryScope memory;
  // The files a function may open (tokenize's vocab_file); null: any.
  std::shared_ptr<const PathPolicy> paths;
  // Where `python` functions run; null: nowhere in this process (the function is made, so that
  // a dispatcher can check a pipeline, but applying it is an error that says how to load one).
  std::shared_ptr<const PythonFunctionHost> python;
  // The names of the input's components when all are known and distinct (set by the builder): a
  // Python function receives a dict.
  std::optional<std::vector<std::string>> input_names;
};

// Creates the function for `spec`; errors name the function and the bad field.
absl::StatusOr<std::unique_ptr<Function>> CreateFunction(const pipeline::Function& spec,
                                                         const FunctionOptions& options);

// ---- helpers for implementations -----------------------------------------------------------

// Checks that `component` indexes `element`; the error names the function.
absl::Status CheckComponent(std::string_view fn, int component, size_t num_components);
// Same check against a spec (skipped when the spec is unknown).
absl::Status CheckComponent(std::string_view fn, int component, const ElementSpec& spec);
// A well-mixed 64-bit seed for one element: same inputs, same seed.
uint64_t ElementSeed(uint64_t seed, const FunctionContext& ctx);
// The seed to use for an optional proto seed: the given one, or a fresh random one.
uint64_t SeedOrRandom(bool has_seed, uint64_t seed);

// Factories of the built-in functions, one per file in lib/functions/.
absl::StatusOr<std::unique_ptr<Function>> MakeParseExample(const pipeline::ParseExample& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeDecodeJpeg(const pipeline::DecodeJpeg& spec, MemoryScope memory = {});
absl::StatusOr<std::unique_ptr<Function>> MakeResize(const pipeline::Resize& spec, MemoryScope memory = {});
absl::StatusOr<std::unique_ptr<Function>> MakeRandomCrop(const pipeline::RandomCrop& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeCenterCrop(const pipeline::CenterCrop& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeRandomFlipLeftRight(const pipeline::RandomFlipLeftRight& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeNormalize(const pipeline::Normalize& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeCast(const pipeline::Cast& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeArith(const pipeline::Arith& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeCompare(const pipeline::Compare& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeTokenize(const pipeline::Tokenize& spec, MemoryScope memory = {},
                                                       std::shared_ptr<const PathPolicy> paths = nullptr);
absl::StatusOr<std::unique_ptr<Function>> MakeSpin(const pipeline::Spin& spec);
absl::StatusOr<std::unique_ptr<Function>> MakeSleep(const pipeline::Sleep& spec);
absl::StatusOr<std::unique_ptr<Function>> MakePlugin(const pipeline::Plugin& spec, const FunctionOptions& options);
absl::StatusOr<std::unique_ptr<Function>> MakeSelect(const pipeline::Select& spec);
absl::StatusOr<std::unique_ptr<Function>> MakePython(const pipeline::Python& spec, const FunctionOptions& options,
                                                     PythonCallKind kind = PythonCallKind::kMap);
// The python function's name when `fn` is one (the builder gives it a map or filter alone).
bool IsPythonFunction(const pipeline::Function& fn);

// proto DataType -> DType.
absl::StatusOr<DType> FromProtoDType(pipeline::DataType dtype);

}  // namespace tfdata
