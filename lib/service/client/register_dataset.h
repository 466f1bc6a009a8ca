// Registering a pipeline with the dispatcher, validated first: the one path used by
// `tfdata register`, `tfdata read PIPELINE` and the Python package's register_dataset.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "lib/pipeline/builder.h"
#include "lib/service/common/dispatcher_client.h"
#include "proto/pipeline.pb.h"

namespace tfdata::service {

// Builds `pipeline` with `options` (so that errors point into `source`, before any worker sees
// it), then registers it. Returns the dataset id. Errors: the pipeline's (InvalidArgument with
// its location), or the dispatcher's (Unavailable, AlreadyExists for an id conflict).
// Thread-safe as far as `dispatcher` is.
absl::StatusOr<std::string> RegisterPipeline(const pipeline::Pipeline& pipeline, const PipelineSource& source,
                                             const BuildOptions& options, const std::string& dataset_id,
                                             Compression compression, DispatcherClient& dispatcher);

}  // namespace tfdata::service
