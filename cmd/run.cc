// `tfdata run PIPELINE`: iterate a pipeline in this process and write its elements.
#include "CLI/CLI.hpp"
#include "cmd/common.h"
#include "cmd/python_flags.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/output/element_writer.h"

namespace tfdata::cmd {
namespace {

struct RunFlags {
  std::string pipeline;
  std::string max_memory;  // empty: half of this machine's memory
  OutputFlags output;
  PythonFlags python;
};

int Run(const RunFlags& f) {
  // Validate the output flags before any work.
  if (auto format = ParseOutputFormat(f.output.format); !format.ok()) return Fail(format.status(), kExitUsage);
  auto loaded = LoadPipelineFile(f.pipeline);
  if (!loaded.ok()) return Fail(loaded.status(), kExitBadPipeline);
  BuildOptions options = LocalBuildOptions();
  auto python = StartPythonHelpers(f.python, "tfdata run");
  if (!python.ok()) return Fail(python.status(), kExitUsage);
  options.functions.python = *python;
  if (!f.max_memory.empty()) {
    auto limit = ParseByteSizeFlag(f.max_memory, "--max-memory");
    if (!limit.ok()) return Fail(limit.status(), kExitUsage);
    options.memory = std::make_shared<MemoryBudget>(*limit, "the memory limit (run --max-memory)");
  }
  auto dataset = BuildDataset(loaded->pipeline, options, loaded->source());
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
  sub->add_option("--max-memory", flags->max_memory,
                  fmt::format("What the pipeline may hold (buffers, batches, caches), in bytes (e.g. 2GiB); more is an "
                              "error naming the op (default: half of this machine's memory, here {})",
                              FormatBytes(DefaultMemoryBudget()->limit())));
  AddOutputFlags(sub, &flags->output);
  AddPythonFlags(sub, &flags->python);
  sub->callback([flags, action] { *action = [flags] { return Run(*flags); }; });
}

}  // namespace tfdata::cmd
