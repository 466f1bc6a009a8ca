// The worker core: runs tasks' pipelines and serves their elements, without any RPC code. The gRPC
// adapter (grpc_worker.h) turns GetElements RPCs into calls here; heartbeats go to the
// dispatcher through a DispatcherClient.
//
// Each task (task.h) has a producer thread that iterates the task's pipeline into a bounded buffer
// of ready elements; GetElements hands buffered elements out by the task's serving policy
// (serving_policy.h): for a plain task to whichever request comes first, so readers sharing a job
// split the stream without duplicates or losses.
//
// Thread-safe. Create with std::make_shared (the in-process data plane holds shared references);
// Start() begins heartbeating, Stop() (also run by the destructor) ends the heartbeats and every
// task's thread, after which GetElements returns UNAVAILABLE.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "lib/service/common/data_transfer.h"
#include "lib/service/common/dispatcher_client.h"
#include "lib/service/common/latency_histogram.h"
#include "lib/service/common/local_workers.h"
#include "lib/service/worker/worker_config.h"

namespace tfdata::service {

class Task;  // task.h

// What an operator sees of a worker (lib/service/metrics): its tasks now, and totals of what
// GetElements served since the process started (all data planes).
struct WorkerCounts {
  int64_t tasks = 0;
  // By dataset: what its tasks produced and served (totals since start; DatasetCounters), and now
  // buffered and held in cross-trainer windows (its current tasks).
  struct Dataset {
    int64_t tasks = 0;
    int64_t elements_produced = 0, bytes_produced = 0;
    double produce_seconds = 0;
    int64_t elements_served = 0, bytes_served = 0, elements_skipped = 0;
    int64_t buffered_elements = 0, buffered_bytes = 0, window_bytes = 0;
  };
  std::map<std::string, Dataset> datasets;
  // COMPRESSION_AUTO tasks now, by their decision (undecided ones are not counted).
  int64_t auto_compressing_tasks = 0, auto_plain_tasks = 0;
  // Responses that asked for compression (snappy, or auto deciding yes), by whether they went
  // compressed, and the bytes snappy took in and gave out for them (gRPC data plane).
  int64_t responses_compressed_total = 0, responses_left_plain_total = 0;
  int64_t compression_input_bytes_total = 0, compression_output_bytes_total = 0;
  int64_t get_elements_total = 0;  // calls that returned elements or the end
  int64_t elements_served_total = 0;
  int64_t bytes_served_total = 0;                   // the elements' tensor bytes, before compression
  LatencyHistogram::Snapshot get_elements_latency;  // every call, waiting for elements included
};

class Worker : public std::enable_shared_from_this<Worker>, public LocalEndpoint {
 public:
  Worker(WorkerConfig config, std::unique_ptr<DispatcherClient> dispatcher);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Sets the address sent with heartbeats (when it is known only after binding). Before Start().
  void SetAddress(std::string address) { config_.worker_address = std::move(address); }
  // Registers the worker for the in-process data plane under its address and starts heartbeating.
  void Start();
  // Ends at once, as if the worker had died: the dispatcher finds out at --worker-timeout (or
  // sooner, from readers' reports). For tests of failures, and the destructor.
  void Stop();
  // Leaves the cluster (SIGTERM): stops heartbeating and producing, then tells the dispatcher in
  // a last heartbeat (bounded by the dispatcher client's deadline), which removes the worker and
  // its tasks and gives the distributed_epoch splits it had not started to other workers; then
  // Stop(). A dispatcher that cannot be reached only delays the exit by that deadline.
  void Leave();

  // `remote_peer`: the request came from another host (COMPRESSION_AUTO compresses only then).
  absl::StatusOr<GetElementsResult> GetElements(const GetElementsRequest& req, bool remote_peer = false);
  // The gRPC adapter's report of a response that asked for compression (EncodedElements).
  void CountCompression(bool sent_compressed, size_t plain_bytes, size_t compressed_bytes);
  // NotFound for a task the worker does not run.
  absl::StatusOr<TaskStats> Stats(int64_t task_id) const;

  const std::string& address() const { return config_.worker_address; }
  // Number of tasks the worker runs (tests).
  size_t NumTasks() const;
  WorkerCounts Counts() const;
  std::vector<int64_t> TaskIds() const;
  // How long the worker has had nothing to do (no task, or only tasks whose streams were served to
  // the end) as of `now`, measured at its heartbeats; from its start if it never had work. For
  // --exit-when-idle.
  absl::Duration IdleFor(absl::Time now) const;
  // Sends one heartbeat now and applies the reply (the heartbeat thread calls this periodically).
  absl::Status Heartbeat();

  // The "local" data plane (lib/service/common/local_workers.h): Start() lists the worker there.
  absl::StatusOr<GetElementsResult> GetElementsInProcess(const GetElementsRequest& req) override {
    return GetElements(req);
  }

 private:
  void HeartbeatLoop();

  WorkerConfig config_;  // worker_address is fixed once Start() ran
  const std::unique_ptr<DispatcherClient> dispatcher_;
  mutable absl::Mutex mu_;
  absl::StatusOr<std::shared_ptr<Task>> FindTask(int64_t task_id) const;

  std::map<int64_t, std::shared_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> get_elements_total_{0}, elements_served_total_{0}, bytes_served_total_{0};
  std::atomic<int64_t> responses_compressed_{0}, responses_left_plain_{0};
  std::atomic<int64_t> compression_input_bytes_{0}, compression_output_bytes_{0};
  // One per dataset the worker ever ran a task of, shared with those tasks.
  std::map<std::string, std::shared_ptr<DatasetCounters>> datasets_ ABSL_GUARDED_BY(mu_);
  LatencyHistogram get_elements_latency_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t dispatcher_incarnation_ ABSL_GUARDED_BY(heartbeat_mu_) = 0;
  absl::Time last_busy_ ABSL_GUARDED_BY(mu_) = absl::Now();
  // Serializes heartbeats (the loop and explicit calls).
  absl::Mutex heartbeat_mu_;
  absl::Notification stop_;
  std::thread heartbeat_thread_;
};

}  // namespace tfdata::service
