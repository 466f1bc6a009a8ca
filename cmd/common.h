// Shared pieces of the subcommands: exit codes, error printing, signal handling.
#pragma once

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "lib/pipeline/loader.h"

namespace tfdata::cmd {

// Exit codes (documented in README.md and `tfdata --help`).
enum ExitCode : int {
  kExitOk = 0,
  kExitRuntimeError = 1,  // the pipeline failed while running (bad data, corrupt file, I/O error)
  kExitUsage = 2,         // bad command line
  kExitBadPipeline = 3,   // the pipeline file cannot be read, parsed or validated
  kExitInterrupted = 130, // stopped by SIGINT/SIGTERM
};

// Prints "tfdata: error: MESSAGE" to stderr and returns `code`.
int Fail(const absl::Status& status, int code);
int Fail(const std::string& message, int code);

// SIGINT/SIGTERM set StopRequested() instead of killing the process, so loops can stop cleanly
// and still print their summary.
void InstallSignalHandlers();
bool StopRequested();
const std::atomic<bool>* StopFlag();

// How subcommands that run a pipeline in this process build it: plugins are allowed, since the
// user runs their own pipeline in their own process.
BuildOptions LocalBuildOptions();

}  // namespace tfdata::cmd
