#include "lib/service/grpc/grpc_dispatcher.h"

#include "lib/service/grpc/grpc_util.h"
#include "lib/service/grpc/grpc_worker.h"

namespace tfdata::service {

#define TFD_ADAPT(Method, Req, Resp)                                                                 \
  grpc::Status GrpcDispatcherService::Method(grpc::ServerContext*, const Req* req, Resp* resp) {   \
    return ToGrpcStatus(dispatcher_->Method(*req, resp));                                           \
  }                                                                                                 \
  absl::Status GrpcDispatcherClient::Method(const Req& req, Resp* resp) {                          \
    grpc::ClientContext ctx;                                                                        \
    SetTimeout(&ctx, timeout_);                                                                     \
    return FromGrpcStatus(stub_->Method(&ctx, req, resp), "dispatcher " + address_ + ": " #Method); \
  }

TFD_ADAPT(RegisterDataset, RegisterDatasetRequest, RegisterDatasetResponse)
TFD_ADAPT(GetDataset, GetDatasetRequest, GetDatasetResponse)
TFD_ADAPT(GetOrCreateJob, GetOrCreateJobRequest, GetOrCreateJobResponse)
TFD_ADAPT(ClientHeartbeat, ClientHeartbeatRequest, ClientHeartbeatResponse)
TFD_ADAPT(ReleaseClient, ReleaseClientRequest, ReleaseClientResponse)
TFD_ADAPT(WorkerHeartbeat, WorkerHeartbeatRequest, WorkerHeartbeatResponse)
TFD_ADAPT(GetSplits, GetSplitsRequest, GetSplitsResponse)
#undef TFD_ADAPT

GrpcDispatcherClient::GrpcDispatcherClient(const std::string& address, absl::Duration timeout)
    : address_(address), timeout_(timeout), stub_(DispatcherService::NewStub(MakeChannel(address))) {
  RegisterGrpcTransport();  // the readers that use this client fetch from workers over "grpc"
}

}  // namespace tfdata::service
