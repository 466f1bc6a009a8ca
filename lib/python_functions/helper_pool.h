// Python functions on a worker (issue 23): a pool of helper processes, each a Python interpreter
// (`PYTHON -m tfdata._helper`) that imported the operator's modules, called through shared memory
// (protocol.h). Processes, not threads: CPython 3.11 runs one thread at a time per process, so N
// helpers are what lets a map with num_parallel_calls N use N cores; and a function that crashes
// or hangs takes down its helper, never the worker.
//
// - Start spawns the helpers and waits until each imported the modules; an import error fails
//   Start with the helper's traceback. A pool with no modules spawns nothing and says, for any
//   function, that it loads none.
// - Call takes an idle helper (waiting for one), writes the inputs, and waits for the reply, whose
//   tensors alias the helper's response region (one copy of a result: the helper's, into it). A
//   helper that dies (a segfault in an extension) fails the call with its signal; one that makes
//   no progress for call_timeout is killed and fails the call. Either way the next call gets a
//   fresh helper.
// - Helpers die with the worker (each watches its parent, even while a call hangs) and share only
//   unnamed memfds, so a crashed worker leaks nothing. Their stdout goes to the worker's stderr.
//
// Thread-safe. The pool kills and reaps its helpers on destruction.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/functions/python_host.h"
#include "lib/python_functions/protocol.h"
#include "lib/python_functions/shared_region.h"

namespace tfdata::python_functions {

struct HelperPoolOptions {
  // The interpreter that runs the helpers; its environment needs the tfdata package and whatever
  // the modules import. Default: $TFDATA_PYTHON, else python3 on PATH.
  std::string python;
  // Modules to import: names found on PYTHONPATH ("my_pkg.augment") or paths of .py files.
  std::vector<std::string> modules;
  // Helper processes: 0 for one per core.
  int helpers = 0;
  // A call that makes no progress for this long is ended (the helper is killed).
  absl::Duration call_timeout = absl::Seconds(60);
  // How long a helper may take to import the modules.
  absl::Duration start_timeout = absl::Seconds(120);
  // Named in errors: "worker 10.0.0.7:5001", "tfdata run".
  std::string where = "this process";
};

class HelperPool : public PythonFunctionHost {
 public:
  static absl::StatusOr<std::shared_ptr<HelperPool>> Start(HelperPoolOptions options);
  ~HelperPool() override;

  absl::Status CheckLoaded(const std::string& name) const override;
  absl::StatusOr<std::vector<PythonCallResult>> Call(const std::string& name, PythonCallKind kind,
                                                     std::vector<Element> inputs,
                                                     const PythonCallNames& names) const override;

  // What errors name as the place (a worker learns its address after Start).
  void set_where(std::string where) ABSL_LOCKS_EXCLUDED(mu_);
  // The functions the modules registered, sorted.
  const std::vector<std::string>& functions() const { return functions_; }
  int size() const { return options_.helpers; }
  // Helpers started since Start (replacements of crashed or hung ones included).
  int64_t spawned() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A response region and the count of calls whose results alias it (protocol.h). Results
  // outlive their helper (a crashed one's too): `pins` is shared with them.
  struct Response {
    SharedRegion region;
    std::shared_ptr<std::atomic<int>> pins = std::make_shared<std::atomic<int>>(0);
  };
  struct Helper {
    pid_t pid = -1;
    int socket = -1;
    SharedRegion request;
    Response responses[kResponseRegions];
    ~Helper();
  };

  explicit HelperPool(HelperPoolOptions options) : options_(std::move(options)) {}
  // A new helper, once it said hello; `functions` gets what it loaded.
  absl::StatusOr<std::unique_ptr<Helper>> Spawn(std::vector<std::string>* functions) const;
  // Runs one call on `h`; on a host failure `h` is unusable (killed).
  absl::StatusOr<std::vector<PythonCallResult>> CallOn(Helper& h, const std::string& name, PythonCallKind kind,
                                                       const std::vector<Element>& inputs, const PythonCallNames& names,
                                                       bool* broken) const;
  std::string Where() const ABSL_LOCKS_EXCLUDED(mu_);

  const HelperPoolOptions options_;
  std::vector<std::string> functions_;  // set by Start, then constant

  mutable absl::Mutex mu_;
  mutable absl::CondVar idle_cv_;
  mutable std::vector<std::unique_ptr<Helper>> idle_ ABSL_GUARDED_BY(mu_);
  mutable int live_ ABSL_GUARDED_BY(mu_) = 0;  // idle, busy or being spawned
  mutable int64_t spawned_ ABSL_GUARDED_BY(mu_) = 0;
  std::string where_ ABSL_GUARDED_BY(mu_);
};

// The interpreter a pool uses when options.python is empty.
std::string DefaultPython();

}  // namespace tfdata::python_functions
