// The flags of Python functions on workers (issue 23), shared by worker, run and local.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "lib/python_functions/helper_pool.h"

namespace tfdata::cmd {

struct PythonFlags {
  std::vector<std::string> modules;
  std::string python;  // empty: $TFDATA_PYTHON or python3
  int helpers = 0;     // 0: one per core
  std::string call_timeout = "60s";
};

void AddPythonFlags(CLI::App* sub, PythonFlags* flags);

// The helper pool the flags ask for (an empty one, that says how to load modules, without
// --python-module). Errors name the flag or the module that failed to import.
absl::StatusOr<std::shared_ptr<python_functions::HelperPool>> StartPythonHelpers(const PythonFlags& flags,
                                                                                 const std::string& where);

}  // namespace tfdata::cmd
