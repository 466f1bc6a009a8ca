// The dispatcher as seen by workers and readers: one method per DispatcherService RPC. The
// implementation used outside tests is GrpcDispatcherClient (grpc_dispatcher.h); keeping
// this an interface keeps the worker and reader cores free of gRPC.
//
// Implementations must be thread-safe. Each call is bounded in time (an unreachable dispatcher
// yields UNAVAILABLE or DEADLINE_EXCEEDED, never a hang).
#pragma once

#include "absl/status/status.h"
#include "proto/service.pb.h"

namespace tfdata::service {

class DispatcherClient {
 public:
  virtual ~DispatcherClient() = default;
  virtual absl::Status RegisterDataset(const RegisterDatasetRequest& req, RegisterDatasetResponse* resp) = 0;
  virtual absl::Status GetDataset(const GetDatasetRequest& req, GetDatasetResponse* resp) = 0;
  virtual absl::Status GetOrCreateJob(const GetOrCreateJobRequest& req, GetOrCreateJobResponse* resp) = 0;
  virtual absl::Status ClientHeartbeat(const ClientHeartbeatRequest& req, ClientHeartbeatResponse* resp) = 0;
  virtual absl::Status ReleaseClient(const ReleaseClientRequest& req, ReleaseClientResponse* resp) = 0;
  virtual absl::Status WorkerHeartbeat(const WorkerHeartbeatRequest& req, WorkerHeartbeatResponse* resp) = 0;
  virtual absl::Status GetSplits(const GetSplitsRequest& req, GetSplitsResponse* resp) = 0;
  virtual absl::Status GetStatus(const GetStatusRequest& req, DispatcherStatus* resp) = 0;
};

// A reader's last call: releases its client at the dispatcher. A failure only logs (at debug):
// the dispatcher releases silent clients after --client-timeout anyway.
void ReleaseClientQuietly(DispatcherClient& dispatcher, int64_t client_id);

}  // namespace tfdata::service
