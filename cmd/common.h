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
  kExitRuntimeError = 1,   // the pipeline failed while running (bad data, corrupt file, I/O error)
  kExitUsage = 2,          // bad command line
  kExitBadPipeline = 3,    // the pipeline file cannot be read, parsed or validated
  kExitPartialLoss = 4,    // read/local: the read ended but lost data (tasks dropped, splits lost)
  kExitInterrupted = 130,  // stopped by SIGINT/SIGTERM
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
// --allowed-path DIR...: the policy (null when none given, after a warning naming `who`, since
// then a pipeline may open any file this process can).
absl::StatusOr<std::shared_ptr<const PathPolicy>> AllowedPathsFlag(const std::vector<std::string>& dirs,
                                                                   const std::string& who);

}  // namespace tfdata::cmd

#include <functional>

#include "CLI/CLI.hpp"
#include "absl/time/time.h"
#include "lib/core/tensor.h"
#include "lib/service/client/reader.h"

namespace tfdata::cmd {

// "500ms", "10s", "5m", "1h"; with `allow_never`, "-1" (and "never") mean forever
// (absl::InfiniteDuration()). Errors name the flag.
absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text, const std::string& flag,
                                                 bool allow_never = false);

// "256MiB", "1GiB", "64KiB", "1000000" (bytes; also KB/MB/GB as powers of 1000). Errors name the flag.
absl::StatusOr<int64_t> ParseByteSizeFlag(const std::string& text, const std::string& flag);
// --target-workers: any, local, auto.
absl::StatusOr<service::TargetWorkers> ParseTargetWorkersFlag(const std::string& text);

// --log-level for the subcommands that log (servers, readers): trace, debug, info, warn, error, off.
void AddLogLevelFlag(CLI::App* sub, std::string* level);
absl::Status ApplyLogLevel(const std::string& level);

// Where and how the elements of a run or a read are written.
struct OutputFlags {
  int64_t take = -1;
  std::string format = "text";
  std::string output;
  bool quiet = false;
};
void AddOutputFlags(CLI::App* sub, OutputFlags* flags);

// Writes the elements `next` yields (see Iterator::Next) as `flags` say, with the progress line
// and the closing summary (followed by `summary_suffix`), until the end, --take, an error or
// SIGINT/SIGTERM. Returns the exit code.
// `checkpoint`, when given, is called with the number of elements written and flushed: every
// `checkpoint_every` elements and once at the end (a read state saved then matches the output).
int WriteElements(const std::function<absl::StatusOr<bool>(Element*)>& next, const OutputFlags& flags,
                  const std::function<std::string()>& summary_suffix = {},
                  const std::function<absl::Status(int64_t)>& checkpoint = {}, int64_t checkpoint_every = 0);

// The reader's losses for the summary line: "" or " (1 task(s) dropped: worker unreachable; 3 split(s) lost)".
std::string DroppedSummary(const service::Reader& reader);
// A read's exit code: `code` from WriteElements, or kExitPartialLoss (with a warning naming what was
// lost) when it ended cleanly but the reader dropped tasks or lost splits.
int ReadExitCode(int code, const service::Reader& reader);

// Blocks until SIGINT/SIGTERM, or until `done` (checked every 20 ms) returns true.
void WaitForStopSignal(const std::function<bool()>& done = {});

}  // namespace tfdata::cmd

#include "lib/service/common/dispatcher_client.h"

namespace tfdata::cmd {

// Writes `port` and a newline to `path` (nothing when path is empty), atomically (temp + rename)
// so a script polling for the file never reads half of it.
absl::Status WritePortFile(const std::string& path, int port);

// Loads and validates a pipeline file (as `tfdata run` would build it), then registers it.
// Returns the dataset id. Errors: the file's (NotFound / InvalidArgument with location), or the
// dispatcher's.
absl::StatusOr<std::string> RegisterPipelineFile(const std::string& path, const std::string& dataset_id,
                                                 service::DispatcherClient& dispatcher,
                                                 service::Compression compression = service::COMPRESSION_NONE);

// Reports a RegisterPipelineFile error: the file's problems exit with kExitBadPipeline, the
// dispatcher's (unreachable, id conflict) with kExitRuntimeError.
int FailRegistration(const absl::Status& status);

// "parallel_epochs" -> PARALLEL_EPOCHS; InvalidArgument naming --mode otherwise.
absl::StatusOr<service::ProcessingMode> ParseModeFlag(const std::string& name);

}  // namespace tfdata::cmd
