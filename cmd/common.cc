#include "cmd/common.h"

#include <csignal>

#include "fmt/format.h"

namespace tfdata::cmd {
namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }
}  // namespace

int Fail(const absl::Status& status, int code) { return Fail(std::string(status.message()), code); }

int Fail(const std::string& message, int code) {
  fmt::print(stderr, "tfdata: error: {}\n", message);
  return code;
}

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool StopRequested() { return g_stop.load(std::memory_order_relaxed); }
const std::atomic<bool>* StopFlag() { return &g_stop; }

BuildOptions LocalBuildOptions() {
  BuildOptions options;
  options.functions.allow_plugins = true;
  return options;
}

}  // namespace tfdata::cmd
