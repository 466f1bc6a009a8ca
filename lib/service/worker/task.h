// One task on a worker: a producer thread iterates the task's pipeline into a bounded buffer
// (task_buffer.h), and GetElements requests are served from it by the task's serving policy
// (serving_policy.h). The task also decides whether responses travel compressed, and reports
// distributed_epoch split progress for the worker's heartbeats.
//
// Ownership and lifetime: the worker owns its tasks (shared, so that a request in flight keeps
// its task alive after the worker dropped it). `config` and `dispatcher` are not owned and must
// outlive the task. The constructor starts the producer thread; the destructor cancels the task
// and joins the thread, so destroy a task outside any lock the producer might need.
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/pipeline/dataset.h"
#include "lib/service/common/data_transfer.h"
#include "lib/service/common/dispatcher_client.h"
#include "lib/service/worker/serving_policy.h"
#include "lib/service/worker/task_buffer.h"
#include "lib/service/worker/task_split_provider.h"
#include "lib/service/worker/worker_config.h"
#include "proto/service.pb.h"

namespace tfdata::service {

class Task {
 public:
  // `counters` (the dataset's, shared with its other tasks) counts what the task produces and serves.
  Task(const TaskDef& def, const WorkerConfig& config, DispatcherClient* dispatcher,
       std::shared_ptr<DatasetCounters> counters = std::make_shared<DatasetCounters>());
  ~Task();
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  // Stops producing, also inside a pipeline's Next() (within one input element of any op's loop);
  // calls waiting in Get return NotFound at once.
  void Cancel();
  // Cancel(), and waits until the producer thread has ended (so SplitsStarted() is final).
  void Stop();
  // distributed_epoch: how many of the task's splits its pipeline has begun.
  int64_t SplitsStarted() const { return splits_ ? splits_->started() : 0; }

  const TaskDef& def() const { return def_; }
  bool distributed() const { return splits_ != nullptr; }
  // The pipeline ended (its elements may still be buffered).
  bool Finished();
  // Nothing left to do: the pipeline ended and everything it produced was served.
  bool Idle();
  // distributed_epoch: how many of the task's splits readers have received in full. An element is
  // tagged with the number of splits started when it was produced; once an element tagged t has
  // been served, splits before the t-th are delivered (exact for pipelines that do not hold
  // elements back across splits, e.g. shuffle). At the end of the stream, all of them.
  int64_t SplitsDelivered();
  // Exactly-once tasks: the splits whose end was served lately (TaskProgress.served_ends).
  std::vector<SplitReceipt> ServedEnds() { return policy_->ServedEnds(); }

  // `remote_peer`: the request came from another host (COMPRESSION_AUTO compresses only then).
  absl::StatusOr<GetElementsResult> Get(const GetElementsRequest& req, bool remote_peer);
  TaskStats Stats();
  DatasetCounters& counters() { return *counters_; }
  // Elements (and their bytes) produced and not yet served.
  std::pair<int64_t, int64_t> Buffered();

 private:
  // Whether this response should travel compressed (the dataset's choice; AUTO measures once).
  bool ShouldCompressFor(const GetElementsResult& result, bool remote_peer);
  // The producer thread: runs the pipeline into buffer_, then records how it ended.
  void Produce();
  absl::Status Run();

  const TaskDef def_;
  const WorkerConfig& config_;
  const std::shared_ptr<DatasetCounters> counters_;
  std::shared_ptr<TaskSplitProvider> splits_;  // distributed_epoch only; set before the thread starts
  // Ends the pipeline's pass even inside one Next() (a filter that never matches): set by Cancel().
  const std::shared_ptr<Cancellation> cancellation_ = std::make_shared<Cancellation>();
  TaskBuffer buffer_;
  const std::unique_ptr<ServingPolicy> policy_;  // serves from buffer_, so declared after it
  absl::Mutex compression_mu_;
  std::optional<bool> auto_compress_ ABSL_GUARDED_BY(compression_mu_);
  std::once_flag joined_;
  std::thread thread_;  // last: starts once every other member is built
};

}  // namespace tfdata::service
