// Reading pipeline files: protobuf text format (.pbtxt, .txtpb, .textproto, and anything
// unrecognized), binary (.pb, .binpb) and JSON (.json).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/text_format.h"
#include "lib/pipeline/builder.h"
#include "proto/pipeline.pb.h"

namespace tfdata {

// A parsed pipeline with what error messages need to point into its file.
struct LoadedPipeline {
  pipeline::Pipeline pipeline;
  std::string name;  // the file path (or a name given for inline text)
  // Field locations (text format only; null otherwise).
  std::unique_ptr<google::protobuf::TextFormat::ParseInfoTree> locations;

  PipelineSource source() const { return PipelineSource{name, locations.get()}; }
};

// Errors: NotFound for a missing file; InvalidArgument "FILE:LINE:COL: message" for bad text.
absl::StatusOr<LoadedPipeline> LoadPipelineFile(const std::string& path);
absl::StatusOr<LoadedPipeline> ParsePipelineText(std::string_view text, std::string name = "<inline>");

// Loads and builds in one step.
absl::StatusOr<DatasetPtr> LoadDataset(const std::string& path, const BuildOptions& options);

}  // namespace tfdata
