// `tfdata bench PIPELINE`: the take(1).cache().repeat() impact estimate.
#include "CLI/CLI.hpp"
#include "cmd/common.h"
#include "cmd/security_flags.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/bench/impact.h"
#include "lib/service/client/reader.h"
#include "lib/service/common/address.h"
#include "lib/service/common/wire_compression.h"
#include "lib/service/grpc/grpc_dispatcher.h"

namespace tfdata::cmd {
namespace {

struct BenchFlags {
  std::string pipeline;
  double duration = 5;
  double warmup = 1;
  double model_rate = 0;
  double step_time_ms = 0;
  bool json = false;
  std::string dispatcher;
  std::string transfer = "auto";
  std::string mode = "parallel_epochs";
  std::string compression = "none";
  service::SecurityFiles security;
};

// Registers the pipeline, repeated, with a live cluster and reads it with one reader (a job of its
// own, in `mode`) for the same warm-up and duration.
absl::StatusOr<ImpactReport::Service> MeasureService(const LoadedPipeline& loaded, const std::string& address,
                                                     const std::string& transfer, service::ProcessingMode mode,
                                                     service::Compression compression, double warmup, double duration) {
  service::GrpcDispatcherClient client(address);
  service::RegisterDatasetRequest req;
  *req.mutable_pipeline() = WithRepeat(loaded.pipeline);
  req.set_compression(compression);
  service::RegisterDatasetResponse resp;
  if (auto st = client.RegisterDataset(req, &resp); !st.ok()) return st;
  service::ReaderOptions options;
  options.dataset_id = resp.dataset_id();
  options.protocol = transfer;
  options.mode = mode;
  auto reader = service::Reader::Create(options, std::make_unique<service::GrpcDispatcherClient>(address));
  if (!reader.ok()) return reader.status();
  auto t = MeasureReads([&](Element* e) { return (*reader)->Next(e); }, warmup, duration, StopFlag());
  ImpactReport::Service s;
  s.workers = (*reader)->num_tasks();
  s.dispatcher = address;
  (*reader)->Close();
  if (!t.ok()) return t.status();
  if (t->elements == 0) {
    return absl::UnavailableError(
        fmt::format("no elements arrived through the service in {} s: are workers running?", warmup + duration));
  }
  s.throughput = *t;
  return s;
}

int Bench(const BenchFlags& f) {
  if (f.duration <= 0) return Fail("--duration must be positive", kExitUsage);
  if (f.warmup < 0) return Fail("--warmup must be >= 0", kExitUsage);
  if (f.model_rate < 0 || f.step_time_ms < 0) return Fail("--model-rate and --step-time must be positive", kExitUsage);
  auto mode = ParseModeFlag(f.mode);
  if (!mode.ok()) return Fail(mode.status(), kExitUsage);
  auto compression = service::ParseCompression(f.compression);
  if (!compression.ok()) return Fail(compression.status(), kExitUsage);
  std::string address;
  if (!f.dispatcher.empty()) {
    auto a = service::ParseAddress(f.dispatcher, "--dispatcher");
    if (!a.ok()) return Fail(a.status(), kExitUsage);
    address = *a;
    if (auto st = ApplyClientSecurityFlags(f.security); !st.ok()) return Fail(st, kExitUsage);
  }
  auto loaded = LoadPipelineFile(f.pipeline);
  if (!loaded.ok()) return Fail(loaded.status(), kExitBadPipeline);
  auto dataset = BuildDataset(loaded->pipeline, LocalBuildOptions(), loaded->source());
  if (!dataset.ok()) return Fail(dataset.status(), kExitBadPipeline);
  auto replay = BuildDataset(WithReplayFirstElement(loaded->pipeline), LocalBuildOptions(), loaded->source());
  if (!replay.ok()) return Fail(replay.status(), kExitBadPipeline);

  if (!f.json) fmt::print(stderr, "measuring the pipeline for {} s (after {} s warm-up)...\n", f.duration, f.warmup);
  auto p = MeasureThroughput(**dataset, f.warmup, f.duration, StopFlag());
  if (!p.ok()) return Fail(p.status(), kExitRuntimeError);
  if (!f.json) fmt::print(stderr, "measuring pipeline + take(1).cache().repeat() for {} s...\n", f.duration);
  auto r = MeasureThroughput(**replay, f.warmup, f.duration, StopFlag());
  if (!r.ok()) return Fail(r.status(), kExitRuntimeError);
  if (StopRequested()) return kExitInterrupted;
  if (p->elements == 0)
    return Fail(fmt::format("{}: the pipeline produced no elements", f.pipeline), kExitRuntimeError);

  std::optional<double> model;
  if (f.model_rate > 0) model = f.model_rate;
  if (f.step_time_ms > 0) model = 1000.0 / f.step_time_ms;
  ImpactReport report = ComputeImpact(*p, *r, model, NumCores());
  if (!address.empty()) {
    if (!f.json) fmt::print(stderr, "measuring through the service at {} for {} s...\n", address, f.duration);
    auto s = MeasureService(*loaded, address, f.transfer, *mode, *compression, f.warmup, f.duration);
    if (StopRequested()) return kExitInterrupted;
    if (!s.ok()) return Fail(s.status(), kExitRuntimeError);
    report.service = *s;
  }
  fmt::print("{}\n", f.json ? FormatImpactJson(report) : FormatImpactTable(report));
  return kExitOk;
}

}  // namespace

void AddBenchCommand(CLI::App& app, std::function<int()>* action) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Estimate what the service could gain: the pipeline's throughput here vs. with take(1).cache().repeat(), "
      "compared with the model's consumption rate");
  sub->add_option("PIPELINE", flags->pipeline, "Pipeline file")->required();
  sub->add_option("--duration", flags->duration, "Seconds to measure each variant")->capture_default_str();
  sub->add_option("--warmup", flags->warmup, "Seconds to run before measuring")->capture_default_str();
  auto* rate =
      sub->add_option("--model-rate", flags->model_rate, "Elements per second the model consumes when data is free");
  auto* step = sub->add_option("--step-time", flags->step_time_ms,
                               "Milliseconds per training step (one element) when data is free");
  rate->excludes(step);
  sub->add_flag("--json", flags->json, "Print one JSON object instead of the table");
  sub->add_option("--dispatcher", flags->dispatcher,
                  "Also measure through this live cluster (HOST:PORT): the pipeline, repeated, read by one reader");
  sub->add_option("--transfer", flags->transfer,
                  "With --dispatcher: the data plane, auto (shared memory to workers on this host, else gRPC), grpc "
                  "or shm")
      ->check(CLI::IsMember({"auto", "grpc", "shm"}))
      ->capture_default_str();
  sub->add_option(
         "--mode", flags->mode,
         "With --dispatcher: the job's processing mode, parallel_epochs or distributed_epoch (see tfdata read)")
      ->capture_default_str();
  sub->add_option("--compression", flags->compression,
                  "With --dispatcher: the registered dataset's compression, none, snappy or auto (see tfdata register)")
      ->capture_default_str();
  AddSecurityFlags(sub, &flags->security, service::SecurityRole::kClient);
  sub->callback([flags, action] { *action = [flags] { return Bench(*flags); }; });
}

}  // namespace tfdata::cmd
