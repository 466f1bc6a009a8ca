#include "lib/service/client/register_dataset.h"

#include "lib/core/status_macros.h"

namespace tfdata::service {

absl::StatusOr<std::string> RegisterPipeline(const pipeline::Pipeline& pipeline, const PipelineSource& source,
                                             const BuildOptions& options, const std::string& dataset_id,
                                             Compression compression, DispatcherClient& dispatcher) {
  TFD_RETURN_IF_ERROR(BuildDataset(pipeline, options, source).status());
  RegisterDatasetRequest req;
  *req.mutable_pipeline() = pipeline;
  req.set_dataset_id(dataset_id);
  req.set_compression(compression);
  RegisterDatasetResponse resp;
  TFD_RETURN_IF_ERROR(dispatcher.RegisterDataset(req, &resp));
  return resp.dataset_id();
}

}  // namespace tfdata::service
