// `tfdata run PIPELINE`: iterate a pipeline in this process and write its elements.
#include <unistd.h>

#include "CLI/CLI.hpp"
#include "cmd/common.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/output/element_writer.h"
#include "lib/output/run_stats.h"

namespace tfdata::cmd {
namespace {

struct RunFlags {
  std::string pipeline;
  int64_t take = -1;
  std::string format = "text";
  std::string output;
  bool quiet = false;
};

int Run(const RunFlags& f) {
  auto format = ParseOutputFormat(f.format);
  if (!format.ok()) return Fail(format.status(), kExitUsage);
  auto loaded = LoadPipelineFile(f.pipeline);
  if (!loaded.ok()) return Fail(loaded.status(), kExitBadPipeline);
  auto dataset = BuildDataset(loaded->pipeline, LocalBuildOptions(), loaded->source());
  if (!dataset.ok()) return Fail(dataset.status(), kExitBadPipeline);
  auto writer = MakeElementWriter(*format, f.output);
  if (!writer.ok()) return Fail(writer.status(), kExitUsage);
  auto it = (*dataset)->MakeIterator(IteratorContext{});
  if (!it.ok()) return Fail(it.status(), kExitRuntimeError);

  // Progress only when a person watches stderr and the elements do not go to the same terminal.
  const bool progress = !f.quiet && isatty(STDERR_FILENO) && (!f.output.empty() || !isatty(STDOUT_FILENO));
  RunStats stats(progress);
  Element e;
  int code = kExitOk;
  while (f.take < 0 || stats.elements() < f.take) {
    if (StopRequested()) {
      code = kExitInterrupted;
      break;
    }
    auto more = (*it)->Next(&e);
    if (!more.ok()) {
      code = Fail(more.status(), kExitRuntimeError);
      break;
    }
    if (!*more) break;
    if (auto st = (*writer)->Write(e); !st.ok()) {
      code = Fail(st, kExitRuntimeError);
      break;
    }
    stats.Add(e);
  }
  it->reset();
  if (auto st = (*writer)->Close(); !st.ok() && code == kExitOk) code = Fail(st, kExitRuntimeError);
  if (!f.quiet) fmt::print(stderr, "{}{}\n", stats.Finish(), code == kExitInterrupted ? " (interrupted)" : "");
  return code;
}

}  // namespace

void AddRunCommand(CLI::App& app, std::function<int()>* action) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* sub = app.add_subcommand("run", "Iterate a pipeline in this process (no service) and write its elements");
  sub->add_option("PIPELINE", flags->pipeline, "Pipeline file (.pbtxt text format, .pb binary, .json)")->required();
  sub->add_option("--take", flags->take, "Stop after N elements (default: all)");
  sub->add_option("--format", flags->format, "Output: text (one element per line), jsonl, tfrecord, null (count only)")
      ->capture_default_str();
  sub->add_option("--output,-o", flags->output, "Write elements to PATH instead of stdout (required for tfrecord)");
  sub->add_flag("--quiet,-q", flags->quiet, "No progress line and no summary on stderr");
  sub->callback([flags, action] { *action = [flags] { return Run(*flags); }; });
}

}  // namespace tfdata::cmd
