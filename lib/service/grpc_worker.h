// The worker's gRPC edge: the WorkerService adapter over the Worker core, and the "grpc" data
// plane client that readers use to fetch elements from a remote worker.
#pragma once

#include <memory>
#include <string>

#include "lib/service/data_transfer.h"
#include "lib/service/worker.h"
#include "proto/service.grpc.pb.h"

namespace tfdata::service {

// Thread-safe; `worker` must outlive it. Elements are encoded with the element frame codec.
class GrpcWorkerService final : public WorkerService::Service {
 public:
  explicit GrpcWorkerService(Worker* worker) : worker_(worker) {}
  grpc::Status GetElements(grpc::ServerContext*, const GetElementsRequest* req, GetElementsResponse* resp) override;

 private:
  Worker* const worker_;
};

// Thread-safe.
class GrpcDataTransferClient final : public DataTransferClient {
 public:
  explicit GrpcDataTransferClient(const std::string& address);
  absl::StatusOr<GetElementsResult> GetElements(const GetElementsRequest& req) override;

 private:
  const std::string address_;
  std::unique_ptr<WorkerService::Stub> stub_;
};

}  // namespace tfdata::service
