// Where `python` functions run (issue 23): the interface between the engine, which knows a
// Python function only by name, and what runs it. Two hosts implement it: a pool of helper
// processes (lib/python_functions/helper_pool.h: tfdata worker/run/local --python-module) and the
// Python package's in-process registry (python/src/functions.cc: pipeline.run(), WorkerServer).
//
// A host outlives every Function made with it (FunctionOptions holds a shared_ptr). Thread-safe:
// a parallel map calls it from several threads at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/core/tensor.h"

namespace tfdata {

// What a call makes of its result: map: one element; filter: a bool scalar (the predicate's
// verdict); flat_map: any number of elements.
enum class PythonCallKind : uint8_t { kMap = 0, kFilter = 1, kFlatMap = 2 };

// One input's outcome: the element(s) it became, or the function's error (the Python exception,
// its type, message and last frames).
using PythonCallResult = absl::StatusOr<std::vector<Element>>;

// The component names that a call knows from the pipeline.
struct PythonCallNames {
  // The inputs' (all distinct), when the pipeline names them: the function receives a dict.
  std::optional<std::vector<std::string>> inputs;
  // Python.output_names: a dict result is put in this order (its keys must be these), a tuple
  // must have this many components. Empty: any structure, unnamed.
  std::vector<std::string> outputs;
};

class PythonFunctionHost {
 public:
  virtual ~PythonFunctionHost() = default;
  // OK when function `name` is loaded; otherwise FailedPrecondition (not NotFound: a reader takes that for a task the
  // worker lost) naming the function, this host (e.g. "worker 10.0.0.7:5001") and the functions it has.
  virtual absl::Status CheckLoaded(const std::string& name) const = 0;
  // Calls function `name` on each input in order; one result per input. A failure of the host
  // itself (a helper process that crashed or exceeded the call time limit) is the returned
  // status, and fails every input of the call.
  virtual absl::StatusOr<std::vector<PythonCallResult>> Call(const std::string& name, PythonCallKind kind,
                                                             std::vector<Element> inputs,
                                                             const PythonCallNames& names) const = 0;
};

}  // namespace tfdata
