// `tfdata local PIPELINE`: a dispatcher, N workers and a reader in this process (the demo).
#include "cmd/common.h"
#include "cmd/python_flags.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/output/element_writer.h"
#include "lib/service/client/reader.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "lib/service/grpc/server.h"

namespace tfdata::cmd {
namespace {

struct LocalFlags {
  std::string pipeline;
  int workers = 1;
  std::string mode = "parallel_epochs";
  std::string transfer = "local";
  OutputFlags output;
  std::string log_level = "warn";
  std::string max_task_memory;  // empty: DefaultTaskMemoryLimit()
  PythonFlags python;
};

int RunLocal(const LocalFlags& f) {
  if (auto st = ApplyLogLevel(f.log_level); !st.ok()) return Fail(st, kExitUsage);
  auto mode = ParseModeFlag(f.mode);
  if (!mode.ok()) return Fail(mode.status(), kExitUsage);
  if (f.workers < 1) return Fail("--workers must be at least 1", kExitUsage);
  if (f.transfer != "local" && f.transfer != "grpc" && f.transfer != "shm" && f.transfer != "auto") {
    return Fail("--transfer: expected local, shm, grpc or auto", kExitUsage);
  }
  if (auto format = ParseOutputFormat(f.output.format); !format.ok()) return Fail(format.status(), kExitUsage);
  int64_t max_task_memory = DefaultTaskMemoryLimit();
  if (!f.max_task_memory.empty()) {
    auto limit = ParseByteSizeFlag(f.max_task_memory, "--max-task-memory");
    if (!limit.ok()) return Fail(limit.status(), kExitUsage);
    max_task_memory = *limit;
  }

  // One pool of helpers for the in-process workers: it is the host's cores that it divides.
  auto python = StartPythonHelpers(f.python, "tfdata local");
  if (!python.ok()) return Fail(python.status(), kExitUsage);
  service::DispatcherServer dispatcher(service::DispatcherConfig{});
  if (auto st = dispatcher.Start("127.0.0.1", 0); !st.ok()) return Fail(st, kExitRuntimeError);
  const std::string address = fmt::format("127.0.0.1:{}", dispatcher.port());
  service::GrpcDispatcherClient client(address);
  auto id = RegisterPipelineFile(f.pipeline, "", client);
  if (!id.ok()) return FailRegistration(id.status());
  std::vector<std::unique_ptr<service::WorkerServer>> workers;
  for (int i = 0; i < f.workers; ++i) {
    service::WorkerServerOptions options;
    options.dispatcher_address = address;
    options.host = "127.0.0.1";
    options.worker_address = "127.0.0.1:%port%";
    options.config.heartbeat_interval = absl::Milliseconds(100);
    options.config.build_options = LocalBuildOptions();  // the user's own pipeline, in the user's process
    options.config.build_options.functions.python = *python;
    options.config.max_task_memory = max_task_memory;
    workers.push_back(std::make_unique<service::WorkerServer>(options));
    if (auto st = workers.back()->Start(); !st.ok()) return Fail(st, kExitRuntimeError);
  }
  // Every worker registers before the job starts, so each one gets a task from the beginning.
  for (int i = 0; i < 500 && dispatcher.dispatcher().NumWorkers() < workers.size(); ++i) {
    if (StopRequested()) return kExitInterrupted;
    for (auto& w : workers) (void)w->worker()->Heartbeat();
  }
  service::ReaderOptions options;
  options.dataset_id = *id;
  options.mode = *mode;
  options.protocol = f.transfer;
  auto reader = service::Reader::Create(options, std::make_unique<service::GrpcDispatcherClient>(address));
  if (!reader.ok()) return Fail(reader.status(), kExitRuntimeError);
  const int code =
      WriteElements([&](Element* e) { return (*reader)->Next(e); }, f.output,
                    [&] { return fmt::format(" from {} worker(s)", f.workers) + DroppedSummary(**reader); });
  (*reader)->Close();
  return ReadExitCode(code, **reader);
}

}  // namespace

void AddLocalCommand(CLI::App& app, std::function<int()>* action) {
  auto f = std::make_shared<LocalFlags>();
  CLI::App* sub = app.add_subcommand(
      "local", "Run a dispatcher, N workers and a reader in this process on free loopback ports (the demo)");
  sub->add_option("PIPELINE", f->pipeline, "Pipeline file")->required();
  sub->add_option("--workers", f->workers, "Number of workers")->capture_default_str();
  sub->add_option("--max-task-memory", f->max_task_memory,
                  fmt::format("What each worker's pipeline may hold, in bytes (e.g. 2GiB); more is an error naming "
                              "the op (default: a quarter of this machine's memory, here {})",
                              FormatBytes(DefaultTaskMemoryLimit())));
  sub->add_option("--mode", f->mode,
                  "Processing mode: parallel_epochs (alias off: every worker runs the whole pipeline) or "
                  "distributed_epoch (alias dynamic: the source is split among the workers, each element once), or a "
                  "static sharding policy: file, data, file_or_data, hint (needs dispatcher --worker-addresses)")
      ->capture_default_str();
  sub->add_option(
         "--transfer", f->transfer,
         "Data plane between workers and reader: local (in-process), shm (shared memory), grpc, or auto (local)")
      ->capture_default_str();
  AddOutputFlags(sub, &f->output);
  AddPythonFlags(sub, &f->python);
  AddLogLevelFlag(sub, &f->log_level);
  sub->callback([f, action] { *action = [f] { return RunLocal(*f); }; });
}

}  // namespace tfdata::cmd
