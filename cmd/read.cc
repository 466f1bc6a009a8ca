// `tfdata read`: read a registered dataset (or a pipeline file, registering it) through the service.
#include "cmd/common.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/output/element_writer.h"
#include "lib/service/grpc_dispatcher.h"
#include "lib/service/grpc_util.h"
#include "lib/service/reader.h"
#include "spdlog/spdlog.h"

namespace tfdata::cmd {
namespace {

struct ReadFlags {
  std::string dispatcher;
  std::string dataset_id;
  std::string pipeline;
  std::string mode = "parallel_epochs";
  std::string job_name;
  int max_outstanding_requests = 4;
  OutputFlags output;
  std::string log_level = "warn";
};

int RunRead(const ReadFlags& f) {
  if (auto st = ApplyLogLevel(f.log_level); !st.ok()) return Fail(st, kExitUsage);
  auto address = service::ParseAddress(f.dispatcher, "--dispatcher");
  if (!address.ok()) return Fail(address.status(), kExitUsage);
  auto mode = ParseModeFlag(f.mode);
  if (!mode.ok()) return Fail(mode.status(), kExitUsage);
  if (f.dataset_id.empty() == f.pipeline.empty()) return Fail("give either --dataset-id or a PIPELINE file", kExitUsage);
  if (f.max_outstanding_requests < 1) return Fail("--max-outstanding-requests must be at least 1", kExitUsage);
  if (auto format = ParseOutputFormat(f.output.format); !format.ok()) return Fail(format.status(), kExitUsage);

  service::ReaderOptions options;
  options.dataset_id = f.dataset_id;
  if (!f.pipeline.empty()) {
    service::GrpcDispatcherClient client(*address);
    auto id = RegisterPipelineFile(f.pipeline, "", client);
    if (!id.ok()) return FailRegistration(id.status());
    options.dataset_id = *id;
  }
  options.mode = *mode;
  options.job_name = f.job_name;
  options.max_outstanding_requests = f.max_outstanding_requests;
  auto reader = service::Reader::Create(options, std::make_unique<service::GrpcDispatcherClient>(*address));
  if (!reader.ok()) return Fail(reader.status(), kExitRuntimeError);
  if (!(*reader)->warning().empty()) fmt::print(stderr, "tfdata: warning: {}\n", (*reader)->warning());
  const int code = WriteElements([&](Element* e) { return (*reader)->Next(e); }, f.output, [&] {
    return DroppedSummary(**reader);
  });
  (*reader)->Close();
  return code;
}

}  // namespace

void AddReadCommand(CLI::App& app, std::function<int()>* action) {
  auto f = std::make_shared<ReadFlags>();
  CLI::App* sub = app.add_subcommand("read", "Read a dataset through the service and write its elements");
  sub->add_option("PIPELINE", f->pipeline, "Pipeline file to register and read (instead of --dataset-id)");
  sub->add_option("--dispatcher", f->dispatcher, "Dispatcher address (HOST:PORT or grpc://HOST:PORT)")->required();
  sub->add_option("--dataset-id", f->dataset_id, "A registered dataset's id");
  sub->add_option("--mode", f->mode, "Processing mode: parallel_epochs (alias off: every worker runs the whole pipeline) or "
                  "distributed_epoch (alias dynamic: the source is split among the workers, each element once), or a "
                  "static sharding policy: file, data, file_or_data, hint (needs dispatcher --worker-addresses)")->capture_default_str();
  sub->add_option("--job-name", f->job_name, "Share the job with other readers of this name");
  sub->add_option("--max-outstanding-requests", f->max_outstanding_requests, "Element requests in flight, at most")
      ->capture_default_str();
  AddOutputFlags(sub, &f->output);
  AddLogLevelFlag(sub, &f->log_level);
  sub->callback([f, action] { *action = [f] { return RunRead(*f); }; });
}

}  // namespace tfdata::cmd
