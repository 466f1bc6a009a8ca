// The bounded buffer between a task's producer thread and the requests it serves: the elements
// the pipeline produced and nobody took yet, with the stream's end (done, error) and
// cancellation. The serving policies (serving_policy.h) take elements from its front.
//
// Thread-safe through its one mutex, mu(): the producer side (AwaitRoom, Push, Finish) and
// Cancel lock it themselves; everything else is called with mu() held, so that a policy can
// take several elements, and change its own state guarded by the same mutex, in one step.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/core/tensor.h"
#include "lib/pipeline/split_isolation.h"

namespace tfdata::service {

class TaskBuffer {
 public:
  struct Buffered {
    Element element;
    int64_t bytes;
    int64_t tag;  // splits started when it was produced (distributed_epoch)
    // Exactly-once tasks: where the element comes from. A marker (split_end, no element) says
    // that split `position.split` of `position.epoch` ended with `position.seq` elements.
    SplitPosition position;
    bool split_end = false;
  };

  // Holds at most `max_elements` elements and, before the last one, `max_bytes` bytes.
  TaskBuffer(int64_t max_elements, int64_t max_bytes) : max_elements_(max_elements), max_bytes_(max_bytes) {}
  TaskBuffer(const TaskBuffer&) = delete;
  TaskBuffer& operator=(const TaskBuffer&) = delete;

  absl::Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }

  // Producer side. Blocks until there is room; returns how many elements fit, or nullopt once
  // cancelled (the producer stops).
  std::optional<int64_t> AwaitRoom() ABSL_LOCKS_EXCLUDED(mu_);
  // Appends the batch (one lock, one wake-up of waiting requests) and clears it.
  void Push(std::vector<Buffered>& batch) ABSL_LOCKS_EXCLUDED(mu_);
  // The pipeline ended; `error` is OK for a clean end.
  void Finish(absl::Status error) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the producer and the requests waiting in Await.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits, releasing mu() meanwhile, until at least `n` elements are buffered, the stream is done
  // or the buffer was cancelled, or until `deadline`. Returns whether that condition holds.
  bool Await(size_t n, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the front element (the buffer must not be empty).
  Element Pop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the front entry, element or split-end marker (the buffer must not be empty).
  Buffered PopEntry() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  size_t size() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return buffer_.size(); }
  int64_t bytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return buffered_bytes_; }
  bool empty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return buffer_.empty(); }
  int64_t front_bytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return buffer_.front().bytes; }
  // Stream index of the front element (the number of elements, not markers, popped so far).
  int64_t next_index() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return next_index_; }
  bool done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; }
  bool cancelled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancelled_; }
  // The pipeline's error once done() (OK for a clean end).
  const absl::Status& error() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return error_; }

  // Split progress (distributed_epoch): the largest tag popped, and whether a reader was told the
  // stream ended.
  int64_t max_popped_tag() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return max_popped_tag_; }
  bool end_served() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return end_served_; }
  void MarkEndServed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { end_served_ = true; }

 private:
  const int64_t max_elements_, max_bytes_;
  absl::Mutex mu_;
  std::deque<Buffered> buffer_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_popped_tag_ ABSL_GUARDED_BY(mu_) = 0;
  bool end_served_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfdata::service
