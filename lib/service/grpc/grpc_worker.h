// The worker's gRPC edge: the WorkerService adapter over the Worker core, and the "grpc" data
// plane client that readers use to fetch elements from a remote worker.
//
// Both ends move GetElements responses as raw bytes (elements_wire.h) rather than protobuf
// messages: the server hands gRPC slices that point into the elements' own buffers, and the client
// copies each frame once. The bytes are still a valid GetElementsResponse.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/generic_stub.h"
#include "lib/service/common/data_transfer.h"
#include "lib/service/grpc/security.h"
#include "lib/service/worker/worker.h"
#include "proto/service.grpc.pb.h"

namespace tfdata::service {

// Serves GetElements through gRPC's async API on threads of its own: a call may block for a while
// (waiting for a task's next element) without tying up gRPC's threads, and the pool grows while
// every thread is busy. Lifetime: register with a ServerBuilder, Start() with the completion queue
// the builder made once the server is built, and after grpc::Server::Shutdown() call Shutdown(),
// which waits for the calls in progress and joins the threads. `worker` must outlive it. Every
// call must carry `security`'s token, if it has one (null: no check).
class GrpcWorkerService final : public WorkerService::WithRawMethod_GetElements<WorkerService::Service> {
 public:
  explicit GrpcWorkerService(Worker* worker, std::shared_ptr<const Security> security = nullptr)
      : worker_(worker), security_(std::move(security)) {}
  ~GrpcWorkerService() override;

  void Start(std::unique_ptr<grpc::ServerCompletionQueue> cq);
  void Shutdown();

 private:
  class Call;
  void Loop();
  void Serve(Call* call);
  void AcceptOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddThreadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Worker* const worker_;
  const std::shared_ptr<const Security> security_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int busy_ ABSL_GUARDED_BY(mu_) = 0;        // threads serving a call
  int live_calls_ ABSL_GUARDED_BY(mu_) = 0;  // Call objects whose tag is still queued or in service
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

// Registers "grpc", and with it "shm" and "auto" (shm/shm_client.h), with the transport registry
// (common/data_transfer.h); idempotent and
// thread-safe. GrpcDispatcherClient's constructor calls it: a static library's object file runs
// its static initializers only when something references it, and a program that only reads
// (GrpcDispatcherClient and a Reader) would otherwise not know "grpc".
void RegisterGrpcTransport();

// Thread-safe. Connects with `security` (TLS, token); the registry's "grpc" transport passes the
// process-wide client security as it is when the client is made (GetClientSecurity()).
class GrpcDataTransferClient final : public DataTransferClient {
 public:
  GrpcDataTransferClient(const std::string& address, std::shared_ptr<const Security> security);
  absl::StatusOr<GetElementsResult> GetElements(const GetElementsRequest& req) override;

 private:
  const std::string address_;
  const std::shared_ptr<const Security> security_;
  grpc::GenericStub stub_;
};

}  // namespace tfdata::service
