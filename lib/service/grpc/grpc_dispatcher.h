// The dispatcher's gRPC edge: the service adapter (each RPC is one call into the Dispatcher core)
// and the client that workers and readers use to reach a remote dispatcher.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "lib/service/common/dispatcher_client.h"
#include "lib/service/dispatcher/dispatcher.h"
#include "lib/service/grpc/security.h"
#include "proto/service.grpc.pb.h"

namespace tfdata::service {

// Thread-safe; `dispatcher` must outlive it. Every call must carry `security`'s token, if it has
// one (null: no check).
class GrpcDispatcherService final : public DispatcherService::Service {
 public:
  explicit GrpcDispatcherService(Dispatcher* dispatcher, std::shared_ptr<const Security> security = nullptr)
      : dispatcher_(dispatcher), security_(std::move(security)) {}

  grpc::Status RegisterDataset(grpc::ServerContext*, const RegisterDatasetRequest* req,
                               RegisterDatasetResponse* resp) override;
  grpc::Status GetDataset(grpc::ServerContext*, const GetDatasetRequest* req, GetDatasetResponse* resp) override;
  grpc::Status GetOrCreateJob(grpc::ServerContext*, const GetOrCreateJobRequest* req,
                              GetOrCreateJobResponse* resp) override;
  grpc::Status ClientHeartbeat(grpc::ServerContext*, const ClientHeartbeatRequest* req,
                               ClientHeartbeatResponse* resp) override;
  grpc::Status ReleaseClient(grpc::ServerContext*, const ReleaseClientRequest* req,
                             ReleaseClientResponse* resp) override;
  grpc::Status WorkerHeartbeat(grpc::ServerContext*, const WorkerHeartbeatRequest* req,
                               WorkerHeartbeatResponse* resp) override;
  grpc::Status GetSplits(grpc::ServerContext*, const GetSplitsRequest* req, GetSplitsResponse* resp) override;
  grpc::Status GetStatus(grpc::ServerContext*, const GetStatusRequest* req, DispatcherStatus* resp) override;

  // While false (the dispatcher replays its journal), every call is UNAVAILABLE: callers retry.
  void set_serving(bool serving) { serving_.store(serving); }
  // Called with each RPC's method name and status code (metrics). Before the server starts.
  using RpcObserver = std::function<void(std::string_view method, int code)>;
  void set_rpc_observer(RpcObserver observer) { observer_ = std::move(observer); }

 private:
  Dispatcher* const dispatcher_;
  const std::shared_ptr<const Security> security_;
  std::atomic<bool> serving_{true};
  RpcObserver observer_;
};

// Thread-safe. Every call has a deadline of `timeout`; failures to reach the dispatcher name it.
// Connects with `security` (TLS, token), or without one with the process-wide client security as
// it is at construction (GetClientSecurity()).
class GrpcDispatcherClient final : public DispatcherClient {
 public:
  explicit GrpcDispatcherClient(const std::string& address, absl::Duration timeout = absl::Seconds(5));
  GrpcDispatcherClient(const std::string& address, std::shared_ptr<const Security> security,
                       absl::Duration timeout = absl::Seconds(5));

  absl::Status RegisterDataset(const RegisterDatasetRequest& req, RegisterDatasetResponse* resp) override;
  absl::Status GetDataset(const GetDatasetRequest& req, GetDatasetResponse* resp) override;
  absl::Status GetOrCreateJob(const GetOrCreateJobRequest& req, GetOrCreateJobResponse* resp) override;
  absl::Status ClientHeartbeat(const ClientHeartbeatRequest& req, ClientHeartbeatResponse* resp) override;
  absl::Status ReleaseClient(const ReleaseClientRequest& req, ReleaseClientResponse* resp) override;
  absl::Status WorkerHeartbeat(const WorkerHeartbeatRequest& req, WorkerHeartbeatResponse* resp) override;
  absl::Status GetSplits(const GetSplitsRequest& req, GetSplitsResponse* resp) override;
  absl::Status GetStatus(const GetStatusRequest& req, DispatcherStatus* resp) override;

 private:
  const std::string address_;
  const absl::Duration timeout_;
  const std::shared_ptr<const Security> security_;
  std::unique_ptr<DispatcherService::Stub> stub_;
};

}  // namespace tfdata::service
