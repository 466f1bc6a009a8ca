// The worker's split source for distributed_epoch tasks.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "lib/pipeline/splits.h"
#include "lib/service/common/dispatcher_client.h"

namespace tfdata::service {

// distributed_epoch: a task's splits, fetched from the dispatcher in batches: 2 at first, doubling
// (up to 16) while a batch lasts less than 50 ms and halving when one lasts over 500 ms, so cheap
// pipelines do not wait on a dispatcher call per split, and a worker that dies holds few splits
// of slow ones. Does not own the dispatcher client, which must outlive it. Thread-safe: the
// producer thread asks for splits (Next), the heartbeat reads the counters, any thread may Cancel.
class TaskSplitProvider final : public SplitProvider {
 public:
  // `first_epoch`: the first epoch to ask splits for (a resumed job starts past the epochs read before).
  TaskSplitProvider(int64_t task_id, DispatcherClient* dispatcher, absl::Duration retry, int64_t first_epoch = 0)
      : task_id_(task_id), dispatcher_(dispatcher), epochs_(first_epoch), retry_(retry) {}

  int64_t StartEpoch() override { return epochs_.fetch_add(1); }

  absl::StatusOr<std::optional<Split>> Next(int64_t epoch) override;

  void Cancel() {
    if (!cancelled_.HasBeenNotified()) cancelled_.Notify();
  }
  // Splits whose elements the source has begun to produce.
  int64_t started() const { return started_.load(); }

 private:
  const int64_t task_id_;
  DispatcherClient* const dispatcher_;
  std::atomic<int64_t> epochs_{0};
  std::atomic<int64_t> started_{0};
  absl::Notification cancelled_;
  // Used by the producer thread only.
  int64_t queue_epoch_ = -1;
  std::deque<Split> queue_;
  const absl::Duration retry_;
  int batch_ = 2;
  int64_t received_ = 0;
  absl::Time last_fetch_ = absl::InfinitePast();
};

}  // namespace tfdata::service
