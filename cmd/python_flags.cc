#include "cmd/python_flags.h"

#include "cmd/common.h"

namespace tfdata::cmd {

void AddPythonFlags(CLI::App* sub, PythonFlags* flags) {
  sub->add_option("--python-module", flags->modules,
                  "A Python module whose @tfdata.function registrations pipelines may call by name (repeatable; a "
                  "module on PYTHONPATH or a .py file). Only these functions run: no code travels in a pipeline");
  sub->add_option("--python", flags->python,
                  "The Python interpreter of the helper processes; it needs the tfdata package and what the modules "
                  "import (default: $TFDATA_PYTHON, else python3)");
  sub->add_option("--python-helpers", flags->helpers,
                  "Python helper processes, each a core's worth of Python (0: one per core)")
      ->capture_default_str();
  sub->add_option("--python-call-timeout", flags->call_timeout,
                  "A Python call that makes no progress for this long fails, and its helper is restarted")
      ->capture_default_str();
}

absl::StatusOr<std::shared_ptr<python_functions::HelperPool>> StartPythonHelpers(const PythonFlags& flags,
                                                                                 const std::string& where) {
  python_functions::HelperPoolOptions options;
  options.python = flags.python;
  options.modules = flags.modules;
  options.helpers = flags.helpers;
  options.where = where;
  auto timeout = ParseDurationFlag(flags.call_timeout, "--python-call-timeout");
  if (!timeout.ok()) return timeout.status();
  options.call_timeout = *timeout;
  if (flags.helpers < 0) return absl::InvalidArgumentError("--python-helpers must be 0 (one per core) or more");
  return python_functions::HelperPool::Start(std::move(options));
}

}  // namespace tfdata::cmd
