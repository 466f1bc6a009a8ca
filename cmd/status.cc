// `tfdata status --dispatcher ADDR [--json] [--watch]`: the dispatcher's status (workers, datasets,
// jobs with their rates, stall and worker estimate, the journal) from its GetStatus RPC: the same
// DispatcherStatus as its status page and /status.json.
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "cmd/common.h"
#include "cmd/security_flags.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/service/common/address.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "lib/service/metrics/status_page.h"

namespace tfdata::cmd {
namespace {

struct StatusFlags {
  std::string dispatcher;
  bool json = false;
  bool watch = false;
  double interval_seconds = 2;
  int count = 0;  // --watch: refreshes, 0 = until interrupted
  service::SecurityFiles security;
};

int RunStatus(const StatusFlags& f) {
  auto dispatcher = service::ParseAddress(f.dispatcher, "--dispatcher");
  if (!dispatcher.ok()) return Fail(dispatcher.status(), kExitUsage);
  if (!(f.interval_seconds > 0 && f.interval_seconds <= 3600)) {
    return Fail("--interval: must be more than 0 and at most 3600 seconds", kExitUsage);
  }
  if (f.count < 0) return Fail("--count: must be 0 (until interrupted) or more", kExitUsage);
  if (auto st = ApplyClientSecurityFlags(f.security); !st.ok()) return Fail(st, kExitUsage);
  service::GrpcDispatcherClient client(*dispatcher);
  InstallSignalHandlers();
  for (int shown = 0;; ++shown) {
    service::DispatcherStatus status;
    if (auto st = client.GetStatus(service::GetStatusRequest(), &status); !st.ok()) {
      return Fail(st, kExitRuntimeError);
    }
    const std::string text = f.json ? service::StatusJson(status) : service::StatusText(status);
    // A terminal watch redraws in place; JSON lines stay appendable for scripts.
    if (f.watch && !f.json && isatty(STDOUT_FILENO)) fmt::print("\033[H\033[2J");
    fmt::print("{}", text);
    std::fflush(stdout);
    if (!f.watch || (f.count > 0 && shown + 1 >= f.count)) return kExitOk;
    const absl::Time until = absl::Now() + absl::Seconds(f.interval_seconds);
    while (absl::Now() < until) {
      if (StopRequested()) return kExitOk;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace

void AddStatusCommand(CLI::App& app, std::function<int()>* action) {
  auto f = std::make_shared<StatusFlags>();
  CLI::App* sub = app.add_subcommand(
      "status", "Show the dispatcher's workers, datasets, jobs (rate, stall, recommended workers) and journal");
  sub->add_option("--dispatcher", f->dispatcher, "Dispatcher address (HOST:PORT or grpc://HOST:PORT)")->required();
  sub->add_flag("--json", f->json, "Print the status as JSON (the dispatcher's /status.json), for scripts");
  sub->add_flag("--watch", f->watch, "Refresh every --interval seconds until interrupted (or --count times)");
  sub->add_option("--interval", f->interval_seconds, "Seconds between refreshes with --watch")->capture_default_str();
  sub->add_option("--count", f->count, "With --watch: stop after this many refreshes (0: never)")
      ->capture_default_str();
  AddSecurityFlags(sub, &f->security, service::SecurityRole::kClient);
  sub->callback([f, action] { *action = [f] { return RunStatus(*f); }; });
}

}  // namespace tfdata::cmd
