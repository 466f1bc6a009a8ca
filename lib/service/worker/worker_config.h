// The worker's settings and a task's counters: shared by the worker (worker.h) and its tasks
// (task.h), so that a task does not need the whole worker header.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "lib/pipeline/builder.h"

namespace tfdata::service {

struct WorkerConfig {
  // The address readers reach this worker at ("host:port"), sent with every heartbeat.
  std::string worker_address;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // Bounds of each task's buffer of ready elements.
  int64_t buffer_elements = 1024;
  int64_t buffer_bytes = 64 << 20;
  BuildOptions build_options;  // its `memory` is ignored: each task gets a budget of its own
  // What one task's pipeline may hold (buffers, caches, batches); a pipeline that needs more fails
  // its task with an error naming the op, and the worker and its other tasks go on.
  int64_t max_task_memory = DefaultTaskMemoryLimit();
  // distributed_epoch: how long a task keeps asking an unreachable dispatcher for splits before
  // it fails (heartbeats are retried for as long as the worker runs).
  absl::Duration dispatcher_retry = absl::Seconds(30);
  // Sent with heartbeats; readers can pick workers by tag (ReaderOptions::worker_tag).
  std::vector<std::string> tags;
  // Cross-trainer cache: the byte bound of each such task's sliding window.
  int64_t cross_trainer_cache_bytes = 256 << 20;
  // Coordinated reads: a round open this long drops the elements no consumer took (and treats
  // those consumers as gone until they ask again), so a stopped consumer does not hold the
  // others back for longer.
  absl::Duration round_expiry = absl::Seconds(30);
  // COMPRESSION_AUTO: the transfer rate assumed to readers on other hosts (bytes/s).
  double link_bytes_per_s = 1.25e9;  // 10 Gbit/s
};

// What a worker's tasks of one dataset produced and served since the worker started (metrics).
// Shared by those tasks (the worker keeps one per dataset, so totals outlive the tasks); each
// counter is updated alone, without a lock.
struct DatasetCounters {
  std::atomic<int64_t> elements_produced{0}, bytes_produced{0};
  // Time the producers spent in the pipeline making those elements (not waiting for room in the
  // buffer): divided by elements_produced, the time per element.
  std::atomic<int64_t> produce_nanos{0};
  std::atomic<int64_t> elements_served{0}, bytes_served{0};
  // Cross-trainer cache: elements trainers skipped (they had left the window).
  std::atomic<int64_t> elements_skipped{0};
};

// A task's counters, for tests and logs.
struct TaskStats {
  int64_t window_bytes = 0, window_peak_bytes = 0, window_max_bytes = 0;  // cross-trainer cache
  int64_t round_elements_dropped = 0, late_elements = 0;                  // coordinated reads
  std::optional<bool> auto_compress;                                      // COMPRESSION_AUTO's decision
};

}  // namespace tfdata::service
