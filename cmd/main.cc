// The tfdata binary: one subcommand per file in cmd/.
#include <malloc.h>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "cmd/common.h"
#include "cmd/subcommands.h"

int main(int argc, char** argv) {
  using namespace tfdata::cmd;
  // First thing: a SIGINT/SIGTERM from now on stops the subcommand cleanly instead of killing it.
  InstallSignalHandlers();
  // Elements and responses of up to tens of MiB are allocated and freed at a high rate. With
  // glibc's defaults each such block is a fresh mmap whose pages fault in (and are zeroed) again;
  // keeping them in the heap measured 10 % more data-plane throughput (docs/performance.md).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  // Debian's abseil is built with its debug default of checking lock order on every Mutex
  // acquisition (a graph lookup per lock: GraphCycles::GetId alone was 2 % of a perf profile of a
  // scalar read). The tests keep the check; the binary, whose locks the tests and the
  // -Wthread-safety build check, does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"tfdata: a standalone input-data service for machine learning (tf.data service, without TensorFlow)"};
  app.footer(
      "Exit codes: 0 success; 1 the pipeline failed while running (bad data, corrupt file, I/O error)\n"
      "or a dispatcher/worker could not be reached;\n"
      "2 bad command line; 3 the pipeline file cannot be read, parsed or validated; 130 interrupted.");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tfdata 0.1.0");
  std::function<int()> action;
  AddRunCommand(app, &action);
  AddBenchCommand(app, &action);
  AddLocalCommand(app, &action);
  AddDispatcherCommand(app, &action);
  AddWorkerCommand(app, &action);
  AddRegisterCommand(app, &action);
  AddReadCommand(app, &action);
  AddStatusCommand(app, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  return action ? action() : kExitUsage;
}
