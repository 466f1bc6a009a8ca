// `tfdata worker`: run a worker that registers with a dispatcher, until SIGINT/SIGTERM.
#include <optional>

#include "cmd/common.h"
#include "cmd/metrics_flags.h"
#include "cmd/python_flags.h"
#include "cmd/security_flags.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/service/common/address.h"
#include "lib/service/grpc/server.h"
#include "spdlog/spdlog.h"

namespace tfdata::cmd {
namespace {

struct WorkerFlags {
  std::string dispatcher;
  std::string host = "0.0.0.0";
  int port = 0;
  std::string port_file;
  std::string worker_address = "localhost:%port%";
  std::string heartbeat_interval = "1s";
  bool allow_plugins = false;
  std::string exit_when_idle;
  std::string dispatcher_retry = "30s";
  std::string log_level = "info";
  std::vector<std::string> tags;
  std::string cross_trainer_cache_size = "256MiB";
  std::string max_task_memory;  // empty: DefaultTaskMemoryLimit()
  std::vector<std::string> allowed_paths;
  std::string round_expiry = "30s";
  double link_gbps = 10;
  bool no_shared_memory = false;
  service::SecurityFiles security;
  PythonFlags python;
  MetricsFlags metrics;
};

int RunWorker(const WorkerFlags& f) {
  if (auto st = ApplyLogLevel(f.log_level); !st.ok()) return Fail(st, kExitUsage);
  auto dispatcher = service::ParseAddress(f.dispatcher, "--dispatcher");
  if (!dispatcher.ok()) return Fail(dispatcher.status(), kExitUsage);
  auto hb = ParseDurationFlag(f.heartbeat_interval, "--heartbeat-interval");
  if (!hb.ok()) return Fail(hb.status(), kExitUsage);
  if (f.port < 0 || f.port > 65535) return Fail("--port: must be 0..65535", kExitUsage);
  std::optional<absl::Duration> idle_limit;
  if (!f.exit_when_idle.empty()) {
    auto d = ParseDurationFlag(f.exit_when_idle, "--exit-when-idle");
    if (!d.ok()) return Fail(d.status(), kExitUsage);
    idle_limit = *d;
  }
  service::WorkerServerOptions options;
  options.dispatcher_address = *dispatcher;
  options.host = f.host;
  options.port = f.port;
  options.worker_address = f.worker_address;
  options.shared_memory = !f.no_shared_memory;
  options.config.heartbeat_interval = *hb;
  auto retry = ParseDurationFlag(f.dispatcher_retry, "--dispatcher-retry");
  if (!retry.ok()) return Fail(retry.status(), kExitUsage);
  options.config.dispatcher_retry = *retry;
  options.config.tags = f.tags;
  auto cache = ParseByteSizeFlag(f.cross_trainer_cache_size, "--cross-trainer-cache-size");
  if (!cache.ok()) return Fail(cache.status(), kExitUsage);
  options.config.cross_trainer_cache_bytes = *cache;
  if (!f.max_task_memory.empty()) {
    auto limit = ParseByteSizeFlag(f.max_task_memory, "--max-task-memory");
    if (!limit.ok()) return Fail(limit.status(), kExitUsage);
    options.config.max_task_memory = *limit;
  }
  auto expiry = ParseDurationFlag(f.round_expiry, "--round-expiry");
  if (!expiry.ok()) return Fail(expiry.status(), kExitUsage);
  options.config.round_expiry = *expiry;
  if (!(f.link_gbps > 0)) return Fail("--link-gbps must be positive", kExitUsage);
  options.config.link_bytes_per_s = f.link_gbps * 1e9 / 8;
  // Workers run pipelines that readers send: shared libraries are loaded only when allowed.
  options.config.build_options.functions.allow_plugins = f.allow_plugins;
  auto paths = AllowedPathsFlag(f.allowed_paths, "worker");
  if (!paths.ok()) return Fail(paths.status(), kExitUsage);
  options.config.build_options.paths = *paths;
  auto security = service::LoadSecurity(f.security, service::SecurityRole::kServerAndClient);
  if (!security.ok()) return Fail(security.status(), kExitUsage);
  options.security = *security;
  // The modules are imported before the worker registers: a module that fails stops it here.
  auto python = StartPythonHelpers(f.python, "this worker");
  if (!python.ok()) return Fail(python.status(), kExitUsage);
  options.config.build_options.functions.python = *python;
  service::WorkerServer server(options);
  if (auto st = server.Start(); !st.ok()) return Fail(st, kExitRuntimeError);
  (*python)->set_where("worker " + server.address());
  auto metrics = service::Metrics::ForWorker(server.worker());
  auto metrics_server = StartMetrics(f.metrics, f.host, metrics.get());
  if (!metrics_server.ok()) {
    server.Leave();
    return Fail(metrics_server.status(), kExitUsage);
  }
  // The line first: a test that waits for the port file then reads stdout must find it there.
  fmt::print("worker listening on grpc://{}{} (dispatcher {})\n", server.address(),
             service::DescribeServerSecurity(security->get()), *dispatcher);
  std::fflush(stdout);
  if (auto st = WritePortFile(f.port_file, server.port()); !st.ok()) return Fail(st, kExitRuntimeError);
  WaitForStopSignal([&] {
    if (!idle_limit) return false;
    if (server.worker()->IdleFor(absl::Now()) < *idle_limit) return false;
    spdlog::info("no job active for {}: exiting (--exit-when-idle)", absl::FormatDuration(*idle_limit));
    return true;
  });
  server.Leave();  // tells the dispatcher, which stops assigning it work at once
  return kExitOk;
}

}  // namespace

void AddWorkerCommand(CLI::App& app, std::function<int()>* action) {
  auto f = std::make_shared<WorkerFlags>();
  CLI::App* sub = app.add_subcommand("worker", "Run a worker for a dispatcher until SIGINT/SIGTERM");
  sub->add_option("--dispatcher", f->dispatcher, "Dispatcher address (HOST:PORT or grpc://HOST:PORT)")->required();
  sub->add_option("--host", f->host, "Interface to listen on")->capture_default_str();
  sub->add_option("--port", f->port, "Port to listen on (0: any free port)")->capture_default_str();
  sub->add_option("--dispatcher-retry", f->dispatcher_retry,
                  "distributed_epoch: how long a task keeps asking an unreachable dispatcher for splits before it "
                  "fails (heartbeats retry for as long as the worker runs)")
      ->capture_default_str();
  sub->add_option("--exit-when-idle", f->exit_when_idle,
                  "Exit (code 0) once no job has been active for this long, e.g. 10m: clusters started for one "
                  "training run end with it");
  sub->add_option("--port-file", f->port_file, "Write the bound port to PATH once listening");
  sub->add_option("--worker-address", f->worker_address,
                  "Address readers reach this worker at; %port% stands for the bound port")
      ->capture_default_str();
  sub->add_option("--heartbeat-interval", f->heartbeat_interval, "Time between heartbeats to the dispatcher")
      ->capture_default_str();
  sub->add_flag("--allow-plugins", f->allow_plugins, "Let pipelines load user functions from shared libraries");
  sub->add_flag("--no-shared-memory", f->no_shared_memory,
                "Serve readers on this host over gRPC only (by default they read through shared memory)");
  AddPythonFlags(sub, &f->python);
  AddMetricsFlags(sub, &f->metrics);
  sub->add_option("--tag", f->tags,
                  "A tag for this worker (repeatable); readers can pick workers by tag (read --worker-tag)");
  sub->add_option("--cross-trainer-cache-size", f->cross_trainer_cache_size,
                  "Cross-trainer cache jobs: the sliding window each task keeps, in bytes (e.g. 256MiB, 4GiB)")
      ->capture_default_str();
  sub->add_option("--allowed-path", f->allowed_paths,
                  "A directory whose files pipelines may read (repeatable; checked after symlinks are resolved). "
                  "Unset: any file this process can read, with a warning");
  sub->add_option("--max-task-memory", f->max_task_memory,
                  fmt::format("What one task's pipeline may hold (buffers, batches, caches), in bytes (e.g. 2GiB); a "
                              "pipeline that needs more fails its task with an error naming the op (default: a quarter "
                              "of this machine's memory, here {})",
                              FormatBytes(DefaultTaskMemoryLimit())));
  sub->add_option("--round-expiry", f->round_expiry,
                  "Coordinated reads: a round open this long drops the elements no consumer took, so a consumer that "
                  "stopped holds the others back at most this long")
      ->capture_default_str();
  sub->add_option("--link-gbps", f->link_gbps,
                  "Compression auto: the network rate to readers on other hosts, in Gbit/s, that compression is "
                  "weighed against")
      ->capture_default_str();
  AddSecurityFlags(sub, &f->security, service::SecurityRole::kServerAndClient);
  AddLogLevelFlag(sub, &f->log_level);
  sub->callback([f, action] { *action = [f] { return RunWorker(*f); }; });
}

}  // namespace tfdata::cmd
