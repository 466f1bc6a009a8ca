#include "lib/service/grpc/grpc_dispatcher.h"

#include "lib/service/grpc/grpc_util.h"
#include "lib/service/grpc/grpc_worker.h"

namespace tfdata::service {

#define TFD_ADAPT(Method, Req, Resp)                                                                               \
  grpc::Status GrpcDispatcherService::Method(grpc::ServerContext* ctx, const Req* req, Resp* resp) {               \
    grpc::Status status = [&] {                                                                                    \
      if (grpc::Status auth = CheckAuthToken(*ctx, security_.get()); !auth.ok()) return auth;                      \
      if (!serving_.load()) {                                                                                      \
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the dispatcher is replaying its journal: try again");  \
      }                                                                                                            \
      return ToGrpcStatus(dispatcher_->Method(*req, resp));                                                        \
    }();                                                                                                           \
    if (observer_) observer_(#Method, status.error_code());                                                        \
    return status;                                                                                                 \
  }                                                                                                                \
  absl::Status GrpcDispatcherClient::Method(const Req& req, Resp* resp) {                                          \
    grpc::ClientContext ctx;                                                                                       \
    SetTimeout(&ctx, timeout_);                                                                                    \
    AddAuthToken(&ctx, security_.get());                                                                           \
    return ExplainSecurityError(                                                                                   \
        FromGrpcStatus(stub_->Method(&ctx, req, resp), "dispatcher " + address_ + ": " #Method), security_.get()); \
  }

TFD_ADAPT(RegisterDataset, RegisterDatasetRequest, RegisterDatasetResponse)
TFD_ADAPT(GetDataset, GetDatasetRequest, GetDatasetResponse)
TFD_ADAPT(GetOrCreateJob, GetOrCreateJobRequest, GetOrCreateJobResponse)
TFD_ADAPT(ClientHeartbeat, ClientHeartbeatRequest, ClientHeartbeatResponse)
TFD_ADAPT(ReleaseClient, ReleaseClientRequest, ReleaseClientResponse)
TFD_ADAPT(WorkerHeartbeat, WorkerHeartbeatRequest, WorkerHeartbeatResponse)
TFD_ADAPT(GetSplits, GetSplitsRequest, GetSplitsResponse)
TFD_ADAPT(GetStatus, GetStatusRequest, DispatcherStatus)
#undef TFD_ADAPT

GrpcDispatcherClient::GrpcDispatcherClient(const std::string& address, absl::Duration timeout)
    : GrpcDispatcherClient(address, GetClientSecurity(), timeout) {}

GrpcDispatcherClient::GrpcDispatcherClient(const std::string& address, std::shared_ptr<const Security> security,
                                           absl::Duration timeout)
    : address_(address),
      timeout_(timeout),
      security_(std::move(security)),
      stub_(DispatcherService::NewStub(MakeChannel(address, security_.get()))) {
  RegisterGrpcTransport();  // the readers that use this client fetch from workers over "grpc"
}

}  // namespace tfdata::service
