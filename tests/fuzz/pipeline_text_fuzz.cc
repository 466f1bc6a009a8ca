// Fuzzes the pipeline parser and builder (validation): arbitrary text must give a pipeline or a
// clean error, never a crash. Pipelines are built, not run (running could sleep or read files).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lib/pipeline/builder.h"
#include "lib/pipeline/fingerprint.h"
#include "lib/pipeline/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto loaded = tfdata::ParsePipelineText(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.pbtxt");
  if (!loaded.ok()) return 0;
  (void)tfdata::PipelineFingerprint(loaded->pipeline);
  tfdata::BuildOptions options;
  options.functions.allow_plugins = false;  // never dlopen fuzzer-chosen paths
  (void)tfdata::BuildDataset(loaded->pipeline, options, loaded->source());
  return 0;
}
