// How a task hands its buffered elements to GetElements requests. A task has one policy, chosen
// by its job's options (MakeServingPolicy):
//   first come   a plain task: each element goes to whichever request comes first, so readers
//                sharing a job split the stream without duplicates or losses;
//   cross-trainer cache  every trainer reads the whole stream from its own cursor over a
//                sliding window (cross_trainer_window.h);
//   rounds       coordinated reads: consumer i takes element i of each round (round_buffer.h).
//
// A policy does not own the task's buffer, which must outlive it. Thread-safe: Serve and AddStats
// lock the buffer's mutex, which also guards the policy's own state.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/service/common/data_transfer.h"
#include "lib/service/worker/task_buffer.h"
#include "lib/service/worker/worker_config.h"
#include "proto/service.pb.h"

namespace tfdata::service {

class ServingPolicy {
 public:
  virtual ~ServingPolicy() = default;
  // Serves one request, waiting up to its timeout for elements. The result leaves `compress`
  // unset (the task decides it).
  virtual absl::StatusOr<GetElementsResult> Serve(const GetElementsRequest& req) = 0;
  // Adds the policy's counters to `stats`.
  virtual void AddStats(TaskStats& stats) = 0;
  // Exactly-once tasks: the splits whose end was served lately, oldest first (see
  // TaskProgress.served_ends).
  virtual std::vector<SplitReceipt> ServedEnds() { return {}; }
};

// The policy `def` asks for, serving from `buffer`. `config` must outlive the policy.
std::unique_ptr<ServingPolicy> MakeServingPolicy(const TaskDef& def, const WorkerConfig& config, TaskBuffer& buffer);

}  // namespace tfdata::service
