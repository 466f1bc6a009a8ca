// `tfdata dispatcher`: run the service's coordinator until SIGINT/SIGTERM.
#include <fstream>

#include <optional>

#include "absl/strings/str_split.h"
#include "cmd/common.h"
#include "cmd/metrics_flags.h"
#include "cmd/security_flags.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/service/common/address.h"
#include "lib/service/grpc/server.h"
#include "spdlog/spdlog.h"

namespace tfdata::cmd {
namespace {

struct DispatcherFlags {
  std::string host = "0.0.0.0";
  int port = 5050;
  std::string port_file;
  std::string worker_timeout = "10m";
  std::string client_timeout = "5m";
  std::string job_gc_timeout = "5m";
  std::string worker_addresses;
  std::string work_dir;
  bool fault_tolerant = false;
  std::string exit_when_idle;
  std::string log_level = "info";
  std::vector<std::string> allowed_paths;
  service::SecurityFiles security;
  MetricsFlags metrics;
};

int RunDispatcher(const DispatcherFlags& f) {
  if (auto st = ApplyLogLevel(f.log_level); !st.ok()) return Fail(st, kExitUsage);
  service::DispatcherConfig config;
  auto wt = ParseDurationFlag(f.worker_timeout, "--worker-timeout");
  auto ct = ParseDurationFlag(f.client_timeout, "--client-timeout");
  auto gt = ParseDurationFlag(f.job_gc_timeout, "--job-gc-timeout", /*allow_never=*/true);
  for (const auto* d : {&wt, &ct, &gt}) {
    if (!d->ok()) return Fail(d->status(), kExitUsage);
  }
  config.worker_timeout = *wt;
  config.client_timeout = *ct;
  config.job_gc_timeout = *gt;
  if (!f.worker_addresses.empty()) {
    for (const std::string& a : std::vector<std::string>(absl::StrSplit(f.worker_addresses, ','))) {
      auto parsed = service::ParseAddress(a, "--worker-addresses");
      if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
      if (std::find(config.worker_addresses.begin(), config.worker_addresses.end(), *parsed) !=
          config.worker_addresses.end()) {
        return Fail(fmt::format("--worker-addresses: {} is listed twice", *parsed), kExitUsage);
      }
      config.worker_addresses.push_back(*parsed);
    }
  }
  if (f.port < 0 || f.port > 65535) return Fail("--port: must be 0..65535", kExitUsage);
  std::optional<absl::Duration> idle_limit;
  if (!f.exit_when_idle.empty()) {
    auto d = ParseDurationFlag(f.exit_when_idle, "--exit-when-idle");
    if (!d.ok()) return Fail(d.status(), kExitUsage);
    idle_limit = *d;
  }
  if (f.fault_tolerant && f.work_dir.empty()) {
    return Fail("--fault-tolerant needs --work-dir DIR (where the journal is kept)", kExitUsage);
  }
  if (!f.work_dir.empty() && !f.fault_tolerant) {
    spdlog::warn("dispatcher: --work-dir without --fault-tolerant: nothing is journaled");
  }
  config.work_dir = f.work_dir;
  auto paths = AllowedPathsFlag(f.allowed_paths, "dispatcher");
  if (!paths.ok()) return Fail(paths.status(), kExitUsage);
  config.build_options.paths = *paths;
  config.fault_tolerant = f.fault_tolerant;
  auto security = service::LoadSecurity(f.security, service::SecurityRole::kServer);
  if (!security.ok()) return Fail(security.status(), kExitUsage);
  service::DispatcherServer server(config, *security);
  auto metrics = service::Metrics::ForDispatcher(&server.dispatcher());
  server.set_rpc_observer([m = metrics.get()](std::string_view method, int code) { m->RecordRpc(method, code); });
  // Metrics first: a taken port is a usage error before the dispatcher replays anything.
  auto metrics_server = StartMetrics(f.metrics, f.host, metrics.get(), &server.dispatcher());
  if (!metrics_server.ok()) return Fail(metrics_server.status(), kExitUsage);
  if (auto st = server.Start(f.host, f.port); !st.ok()) return Fail(st, kExitRuntimeError);
  // The line first: a test that waits for the port file then reads stdout must find it there.
  fmt::print("dispatcher listening on grpc://{}:{}{}\n", f.host, server.port(),
             service::DescribeServerSecurity(security->get()));
  std::fflush(stdout);
  if (auto st = WritePortFile(f.port_file, server.port()); !st.ok()) return Fail(st, kExitRuntimeError);
  WaitForStopSignal([&] {
    if (!idle_limit) return false;
    if ((&server.dispatcher())->IdleFor(absl::Now()) < *idle_limit) return false;
    spdlog::info("no job active for {}: exiting (--exit-when-idle)", absl::FormatDuration(*idle_limit));
    return true;
  });
  server.Stop();
  return kExitOk;
}

}  // namespace

void AddDispatcherCommand(CLI::App& app, std::function<int()>* action) {
  auto f = std::make_shared<DispatcherFlags>();
  CLI::App* sub = app.add_subcommand("dispatcher", "Run the dispatcher (the coordinator) until SIGINT/SIGTERM");
  sub->add_option("--host", f->host, "Interface to listen on")->capture_default_str();
  sub->add_option("--port", f->port, "Port to listen on (0: any free port)")->capture_default_str();
  sub->add_option("--exit-when-idle", f->exit_when_idle,
                  "Exit (code 0) once no job has been active for this long, e.g. 10m: clusters started for one "
                  "training run end with it");
  sub->add_option("--port-file", f->port_file, "Write the bound port to PATH once listening");
  sub->add_option("--worker-addresses", f->worker_addresses,
                  "Static sharding: the fixed worker list HOST:PORT,HOST:PORT,... as the workers advertise "
                  "themselves (worker --worker-address); a worker's index is its position, others are refused");
  sub->add_option("--work-dir", f->work_dir, "Directory for the journal of a --fault-tolerant dispatcher");
  sub->add_option("--allowed-path", f->allowed_paths,
                  "A directory that list_files may list (repeatable; checked after symlinks are resolved). Unset: "
                  "any, with a warning");
  sub->add_flag("--fault-tolerant", f->fault_tolerant,
                "Journal every state change to --work-dir (synced before answering) and replay it on start, so "
                "a restarted dispatcher carries on with the same datasets, jobs, tasks and split positions");
  sub->add_option("--worker-timeout", f->worker_timeout, "A worker silent this long is lost")->capture_default_str();
  sub->add_option("--client-timeout", f->client_timeout, "A reader silent this long is released")
      ->capture_default_str();
  sub->add_option("--job-gc-timeout", f->job_gc_timeout, "A job without readers this long is removed (-1: never)")
      ->capture_default_str();
  AddSecurityFlags(sub, &f->security, service::SecurityRole::kServer);
  AddMetricsFlags(sub, &f->metrics);
  AddLogLevelFlag(sub, &f->log_level);
  sub->callback([f, action] { *action = [f] { return RunDispatcher(*f); }; });
}

}  // namespace tfdata::cmd
