// `tfdata run PIPELINE`: iterate a pipeline in this process and write its elements.
#include "CLI/CLI.hpp"
#include "cmd/common.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/output/element_writer.h"

namespace tfdata::cmd {
namespace {

struct RunFlags {
  std::string pipeline;
  OutputFlags output;
};

int Run(const RunFlags& f) {
  // Validate the output flags before any work.
  if (auto format = ParseOutputFormat(f.output.format); !format.ok()) return Fail(format.status(), kExitUsage);
  auto loaded = LoadPipelineFile(f.pipeline);
  if (!loaded.ok()) return Fail(loaded.status(), kExitBadPipeline);
  auto dataset = BuildDataset(loaded->pipeline, LocalBuildOptions(), loaded->source());
  if (!dataset.ok()) return Fail(dataset.status(), kExitBadPipeline);
  auto it = (*dataset)->MakeIterator(IteratorContext{});
  if (!it.ok()) return Fail(it.status(), kExitRuntimeError);
  return WriteElements([&](Element* e) { return (*it)->Next(e); }, f.output);
}

}  // namespace

void AddRunCommand(CLI::App& app, std::function<int()>* action) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* sub = app.add_subcommand("run", "Iterate a pipeline in this process (no service) and write its elements");
  sub->add_option("PIPELINE", flags->pipeline, "Pipeline file (.pbtxt text format, .pb binary, .json)")->required();
  AddOutputFlags(sub, &flags->output);
  sub->callback([flags, action] { *action = [flags] { return Run(*flags); }; });
}

}  // namespace tfdata::cmd
