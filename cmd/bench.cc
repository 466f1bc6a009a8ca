// `tfdata bench PIPELINE`: the take(1).cache().repeat() impact estimate.
#include "CLI/CLI.hpp"
#include "cmd/common.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/bench/impact.h"

namespace tfdata::cmd {
namespace {

struct BenchFlags {
  std::string pipeline;
  double duration = 5;
  double warmup = 1;
  double model_rate = 0;
  double step_time_ms = 0;
  bool json = false;
};

int Bench(const BenchFlags& f) {
  if (f.duration <= 0) return Fail("--duration must be positive", kExitUsage);
  if (f.warmup < 0) return Fail("--warmup must be >= 0", kExitUsage);
  if (f.model_rate < 0 || f.step_time_ms < 0) return Fail("--model-rate and --step-time must be positive", kExitUsage);
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
  if (p->elements == 0) return Fail(fmt::format("{}: the pipeline produced no elements", f.pipeline), kExitRuntimeError);

  std::optional<double> model;
  if (f.model_rate > 0) model = f.model_rate;
  if (f.step_time_ms > 0) model = 1000.0 / f.step_time_ms;
  const ImpactReport report = ComputeImpact(*p, *r, model, NumCores());
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
  auto* rate = sub->add_option("--model-rate", flags->model_rate,
                               "Elements per second the model consumes when data is free");
  auto* step = sub->add_option("--step-time", flags->step_time_ms,
                               "Milliseconds per training step (one element) when data is free");
  rate->excludes(step);
  sub->add_flag("--json", flags->json, "Print one JSON object instead of the table");
  sub->callback([flags, action] { *action = [flags] { return Bench(*flags); }; });
}

}  // namespace tfdata::cmd
