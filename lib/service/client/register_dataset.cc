#include "lib/service/client/register_dataset.h"

namespace tfdata::service {

absl::StatusOr<std::string> RegisterPipeline(const pipeline::Pipeline& pipeline, const PipelineSource& source,
                                             const BuildOptions& options, const std::string& dataset_id,
                                             Compression compression, DispatcherClient& dispatcher) {
  if (auto ds = BuildDataset(pipeline, options, source); !ds.ok()) return ds.status();
  RegisterDatasetRequest req;
  *req.mutable_pipeline() = pipeline;
  req.set_dataset_id(dataset_id);
  req.set_compression(compression);
  RegisterDatasetResponse resp;
  if (auto st = dispatcher.RegisterDataset(req, &resp); !st.ok()) return st;
  return resp.dataset_id();
}

}  // namespace tfdata::service
