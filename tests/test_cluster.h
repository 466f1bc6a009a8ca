// A test-only in-process cluster: a real dispatcher and N real workers (gRPC servers on port 0 on
// loopback), with workers that can be added, stopped and restarted. Not thread-safe: one test
// thread drives it.
#pragma once

#include <atomic>
#include <functional>

#include <memory>
#include <string>
#include <vector>

#include "lib/service/client/reader.h"
#include "lib/service/grpc/server.h"

namespace tfdata::testing {

class TestCluster {
 public:
  // Short heartbeats and time-outs so that tests about loss and joins run fast.
  explicit TestCluster(int num_workers, service::DispatcherConfig config = FastConfig());
  ~TestCluster();

  static service::DispatcherConfig FastConfig();

  const std::string& dispatcher_address() const { return dispatcher_address_; }
  service::Dispatcher& dispatcher() { return dispatcher_->dispatcher(); }
  std::unique_ptr<service::DispatcherClient> NewDispatcherClient() const;

  // Starts one more worker (on `port`, 0: any) and waits until the dispatcher knows it. Returns its
  // index.
  size_t AddWorker(int port = 0);
  // The configuration of workers started from now on (heartbeats are shortened regardless).
  void set_worker_config(service::WorkerConfig config) { worker_config_ = std::move(config); }
  // Starts a worker the dispatcher may refuse (static sharding); does not wait.
  service::WorkerServer& StartUnlistedWorker();
  // `n` distinct loopback ports that were free a moment ago (for fixed worker lists).
  static std::vector<int> FreePorts(int n);
  // Stops a worker as a crash would (the dispatcher finds out at the worker timeout).
  void StopWorker(size_t index);
  // Stops a worker the way SIGTERM does: it tells the dispatcher that it leaves.
  void LeaveWorker(size_t index);
  // Starts a stopped worker again (on a new port: a new worker to the dispatcher).
  void RestartWorker(size_t index);
  service::WorkerServer& worker(size_t index) { return *workers_.at(index); }
  size_t num_workers() const { return workers_.size(); }

  // A reader with these options (its heartbeat shortened like the cluster's).
  absl::StatusOr<std::unique_ptr<service::Reader>> NewReader(service::ReaderOptions options);
  // Registers an inline pipeline (text format); REQUIREs success.
  std::string Register(const std::string& pipeline_text, const std::string& dataset_id = "",
                       service::Compression compression = service::COMPRESSION_NONE);
  // A reader of `dataset_id`.
  absl::StatusOr<std::unique_ptr<service::Reader>> NewReader(const std::string& dataset_id,
                                                             const std::string& job_name = "",
                                                             const std::string& protocol = "grpc");

 private:
  std::unique_ptr<service::WorkerServer> StartWorker(int port = 0);
  void WaitForWorkers(size_t n);

  std::unique_ptr<service::DispatcherServer> dispatcher_;
  std::string dispatcher_address_;
  service::WorkerConfig worker_config_;
  std::vector<std::unique_ptr<service::WorkerServer>> workers_;
  size_t running_ = 0;
};

// Joins a parallel_epochs job of `dataset_id` as a client and returns its task on worker 0 (waits
// until that worker runs it). For tests that call a worker's data plane directly.
service::TaskInfo OneTask(TestCluster& cluster, const std::string& dataset_id);

// A GetElements request for `task_id` with these bounds and a 2 s wait.
service::GetElementsRequest ElementsRequest(int64_t task_id, int max_elements = 16, int64_t max_bytes = 1 << 20);

// A cluster whose dispatcher admits exactly `n` workers (static sharding: its worker list), all
// started.
struct StaticCluster {
  explicit StaticCluster(int n);
  static service::DispatcherConfig Config(const std::vector<int>& ports);
  // Reads `id` in `mode` to the end with one reader.
  absl::StatusOr<std::vector<Element>> Read(const std::string& id, service::ProcessingMode mode);
  std::vector<int> ports;
  TestCluster cluster;
};

// The options of an exactly-once distributed_epoch reader of `dataset_id` (a job of its own when
// `job_name` is empty).
service::ReaderOptions ExactlyOnceOptions(const std::string& dataset_id, const std::string& job_name = "");

// Reads a reader to its end; REQUIREs no error.
std::vector<Element> ReadAll(service::Reader& reader);
// Reads with `readers` readers of `options` (give them a job name to share one job), each in its
// own thread, to the end; CHECKs that none fails. Returns all the elements, reader after reader.
// `readers_out`, when given, receives the readers (closed) for their counters. `during`, when
// given, runs on the calling thread while they read, with the count of elements read so far (to
// stop a worker mid-read, say).
std::vector<Element> ReadShared(TestCluster& cluster, const service::ReaderOptions& options, int readers,
                                std::vector<std::unique_ptr<service::Reader>>* readers_out = nullptr,
                                const std::function<void(const std::atomic<int64_t>& read)>& during = nullptr);

}  // namespace tfdata::testing
