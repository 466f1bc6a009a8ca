// Test helpers: build a pipeline from text and collect its elements.
#pragma once

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/status/statusor.h"
#include "lib/pipeline/builder.h"
#include "lib/pipeline/loader.h"

namespace tfdata::testing {

inline absl::StatusOr<DatasetPtr> BuildText(const std::string& text) {
  auto loaded = ParsePipelineText(text, "test.pbtxt");
  if (!loaded.ok()) return loaded.status();
  return BuildDataset(loaded->pipeline, BuildOptions{}, loaded->source());
}

// Elements of the pipeline; fails the calling test (via the status) on any error.
inline absl::StatusOr<std::vector<Element>> RunText(const std::string& text, int64_t limit = -1) {
  auto ds = BuildText(text);
  if (!ds.ok()) return ds.status();
  return Collect(**ds, limit);
}

// The pipeline proto of `text`; REQUIREs that it parses.
inline pipeline::Pipeline ParsedPipeline(const std::string& text) {
  auto loaded = ParsePipelineText(text);
  REQUIRE(loaded.ok());
  return loaded->pipeline;
}

// Error message of building `text` ("" if it built).
inline std::string BuildError(const std::string& text) {
  auto ds = BuildText(text);
  return ds.ok() ? "" : std::string(ds.status().message());
}

}  // namespace tfdata::testing
