// tfdata._native: the C++ side of the Python package (python/tfdata wraps it).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

#include "python/src/elements.h"
#include "python/src/iterator.h"
#include "python/src/pipelines.h"

namespace tfdata::python {
void BindService(nanobind::module_& m);
void BindIo(nanobind::module_& m);
void BindFunctions(nanobind::module_& m);
}  // namespace tfdata::python

NB_MODULE(_native, m) {
  m.doc() = "tfdata's C++ core; use the tfdata package, not this module.";
  // As the tfdata binary (cmd/main.cc): no lock-order check on every Mutex acquisition.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  tfdata::python::BindElements(m);
  tfdata::python::BindIterator(m);
  tfdata::python::BindPipelines(m);
  tfdata::python::BindService(m);
  tfdata::python::BindIo(m);
  tfdata::python::BindFunctions(m);

  // The same allocator settings as the tfdata binary (cmd/main.cc): received responses of 1-16 MiB
  // stay in the heap instead of being mapped, faulted in and zeroed afresh each time (bench/python.sh
  // measured it on 9.6 MB batches). TFDATA_MALLOPT=0 leaves the process's malloc as it was.
  if (const char* v = std::getenv("TFDATA_MALLOPT"); v == nullptr || std::strcmp(v, "0") != 0) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }

  // The servers' logs go to stderr, warnings and errors only, unless the user asks for more: a
  // trainer's stdout is its own.
  if (spdlog::get("tfdata") == nullptr) spdlog::set_default_logger(spdlog::stderr_color_mt("tfdata"));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e tfdata %^%l%$ %v");
  spdlog::set_level(spdlog::level::warn);
  m.def(
      "set_log_level",
      [](const std::string& level) {
        const auto l = spdlog::level::from_str(level);
        if (l == spdlog::level::off && level != "off") {
          throw nanobind::value_error(
              ("log level \"" + level + "\" is not one of trace, debug, info, warn, error, off").c_str());
        }
        spdlog::set_level(l);
      },
      "Log level of the servers and readers in this process: trace, debug, info, warn (default), error, off.");
}
